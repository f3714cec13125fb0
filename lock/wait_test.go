package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Waiting: a waiter sleeps on pub/sub (no commands), is woken by the
// release that hands it the key, and falls back to the lease when no
// message comes.

func TestWakeUpOnRelease(t *testing.T) {
	locktest.Timed(t)
	_, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder, ctx, "wake") // 30 s lease

	cc := locktest.CountCommands(rdb)
	done, res := lockAsync(waiter, ctx, "wake")
	waitSubscribed(t, rdb, "wake", 1)
	waitQueued(t, rdb, "wake", 1)
	// The calls around its subscription end (no command for 100 ms), and
	// from then on the waiter is asleep: it must send nothing.
	last, quiet := cc.N(), time.Now()
	locktest.Eventually(t, 5*time.Second, "the waiter's first calls to end", func() bool {
		if n := cc.N(); n != last {
			last, quiet = n, time.Now()
		}
		return time.Since(quiet) >= 100*time.Millisecond
	})
	before := cc.N()
	time.Sleep(300 * time.Millisecond)
	if n := cc.N() - before; n != 0 {
		t.Fatalf("blocked waiter sent %d commands in 300 ms", n)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	acquired(t, done, res, "waiter")
	// Far below the 30 s lease: the release message woke the waiter.
	if d := res.at.Sub(released); d > locktest.Bound(500*time.Millisecond) {
		t.Fatalf("waiter acquired %v after the release", d)
	} else {
		t.Logf("waiter acquired %v after the release", d)
	}
}

func TestLostNotificationFallsBackToLease(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	_, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, rdb)
	ctx := context.Background()
	// The holder never unlocks, as if it crashed: no release message comes,
	// and the key lapses when its 1 s lease ends.
	held, unlock := locktest.MustLock(t, holder, ctx, "quiet", lock.WithFixedLease(time.Second))
	defer unlock()
	taken := time.Now()
	done, res := lockAsync(waiter, ctx, "quiet")
	waitSubscribed(t, rdb, "quiet", 1)
	locktest.Within(t, done, 3*time.Second, "waiter with no release message")
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.unlock()
	if d := res.at.Sub(taken); d > time.Second+locktest.Bound(500*time.Millisecond) {
		t.Fatalf("waiter acquired %v after the lock was taken; want soon after the 1 s lease ended", d)
	}
	locktest.Within(t, held.Done(), time.Second, "the old holder told its fixed lease ended")
}

func TestWaitersInOneProcessShareOneSubscription(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	_, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "turns")
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() {
			_, unlock, err := c.Lock(ctx, "turns")
			if err == nil {
				err = unlock()
			}
			errs <- err
		}()
	}
	waitSubscribed(t, rdb, "turns", 1)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	for range n { // each waiter gets its turn without waiting for a lease
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiter did not get its turn")
		}
	}
	waitSubscribed(t, rdb, "turns", 0) // the last waiter unsubscribed
}

func TestQueuedWaiterReportsRemainingLease(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "q", lock.WithLease(10*time.Second))
	defer unlock()
	head, cancel := context.WithCancel(ctx)
	defer cancel()
	done, _ := lockAsync(c, head, "q") // waits at the head of the queue
	defer func() { cancel(); <-done }()
	waitSubscribed(t, rdb, "q", 1)
	// This one queues behind the head and never makes an attempt of its own.
	_, _, err := c.Lock(ctx, "q", lock.WithMaxWait(50*time.Millisecond))
	var ne *lock.NotObtainedError
	if !errors.As(err, &ne) || ne.RemainingLease <= 9*time.Second {
		t.Fatalf("queued waiter's error %v: want the holder's remaining lease", err)
	}
}

func TestSubscriptionOutlivesTheLastWaiterBriefly(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	_, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder, ctx, "linger")
	done, res := lockAsync(waiter, ctx, "linger")
	waitSubscribed(t, rdb, "linger", 1)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	acquired(t, done, res, "waiter")
	left := time.Now()
	if err := res.unlock(); err != nil {
		t.Fatal(err)
	}
	// Kept for a second after the last waiter left, so a key in steady
	// demand is not subscribed to again for every wait...
	if since := time.Since(left); subscribers(t, rdb, "linger") != 1 && since < 500*time.Millisecond {
		t.Fatalf("subscription gone %v after the last waiter left, want it kept for 1 s", since)
	}
	// ...and then dropped.
	waitSubscribed(t, rdb, "linger", 0)
}

// A release hands the key to the first queued waiter in its script: the
// waiter, in another Client, learns it from the message and starts without
// sending a command, with a token larger than the last holder's.
func TestHandOffStartsWithoutACommand(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	wrdb := srv.Client(t)
	sent := locktest.CountCommands(wrdb)
	waiter := locktest.NewClient(t, wrdb)
	ctx := context.Background()
	hctx, unlock := locktest.MustLock(t, holder, ctx, "handoff")
	before, _ := lock.FencingToken(hctx, "handoff")
	done, res := lockAsync(waiter, ctx, "handoff")
	waitQueued(t, rdb, "handoff", 1)
	time.Sleep(100 * time.Millisecond) // its subscription is confirmed, and its attempt after it made
	n := sent.N()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, done, 2*time.Second, "the waiter")
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.unlock()
	if d := sent.N() - n; d != 0 {
		t.Errorf("the waiter sent %d commands between the release and holding the key, want 0", d)
	}
	if tok, ok := lock.FencingToken(res.ctx, "handoff"); !ok || tok <= before {
		t.Errorf("token after the hand-off %d (ok %v), before %d: want larger", tok, ok, before)
	}
}

// A key handed over has the claim window's TTL until its holder renews it
// to its lease; the watchdog does so well before the window ends, so a
// hold longer than the window is not lost. A fixed lease is set by a
// confirming attempt at once.
func TestHandedOverHoldKeepsItsLease(t *testing.T) {
	t.Parallel() // long: holds past the claim window
	for _, tc := range []struct {
		name string
		opts []lock.LockOption
		want time.Duration // PTTL at least, right after the hand-off
	}{
		{"watchdog", nil, 0},
		{"fixed lease", []lock.LockOption{lock.WithFixedLease(20 * time.Second)}, 15 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, rdb := newReal(t)
			holder := locktest.NewClient(t, rdb)
			waiter := locktest.NewClient(t, rdb)
			ctx := context.Background()
			_, unlock := locktest.MustLock(t, holder, ctx, "kept")
			done, res := lockAsync(waiter, ctx, "kept", tc.opts...)
			waitQueued(t, rdb, "kept", 1)
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
			locktest.Within(t, done, 2*time.Second, "the waiter")
			if res.err != nil {
				t.Fatal(res.err)
			}
			defer res.unlock()
			if ttl := rdb.PTTL(ctx, "lockkit:{kept}").Val(); ttl < tc.want {
				t.Fatalf("PTTL right after the hand-off = %v, want at least %v", ttl, tc.want)
			}
			time.Sleep(2500 * time.Millisecond) // 2.5 claim windows
			if !lock.Held(res.ctx, "kept") || res.ctx.Err() != nil {
				t.Fatalf("hold lost %v after the hand-off: %v", 2500*time.Millisecond, context.Cause(res.ctx))
			}
			if ttl := rdb.PTTL(ctx, "lockkit:{kept}").Val(); ttl < 5*time.Second {
				t.Fatalf("PTTL 2.5 s after the hand-off = %v, want the lease's", ttl)
			}
		})
	}
}

// A hand-off is told to the receiving waiter's Client, on its own channel,
// and to at most three other Clients, watchers further back in the queue
// (which check after the claim window that the receiver took the key):
// however many Clients wait, the cost of a hand-off in Redis stays four
// messages at most.
func TestHandOffIsToldToFourClientsAtMost(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	watch := srv.Client(t).PSubscribe(ctx, "lockkit:{told}:released*")
	defer watch.Close()
	if _, err := watch.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	holder := locktest.NewClient(t, rdb)
	_, unlock := locktest.MustLock(t, holder, ctx, "told")
	const waiters = 6
	var results []*lockResult
	var dones []<-chan struct{}
	for i := range waiters {
		done, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, "told")
		waitQueued(t, rdb, "told", int64(i+1))
		results, dones = append(results, res), append(dones, done)
	}
	waitSubscribed(t, rdb, "told", waiters)
	for i := range waiters {
		if i == 0 {
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
		} else if err := results[i-1].unlock(); err != nil {
			t.Fatal(err)
		}
		locktest.Within(t, dones[i], 2*time.Second, "the next waiter")
		if results[i].err != nil {
			t.Fatal(results[i].err)
		}
		var channels []string
		receiver := ""
		for {
			msg, err := watch.ReceiveTimeout(ctx, 200*time.Millisecond)
			if err != nil {
				break
			}
			m, ok := msg.(*redis.Message)
			if !ok {
				t.Fatalf("hand-off %d: %T, want a message", i, msg)
			}
			fields := strings.Fields(m.Payload)
			if len(fields) != 4 {
				t.Fatalf("hand-off %d: payload %q, want <from> <owner> <token> <ms>", i, m.Payload)
			}
			client := fields[1][:strings.LastIndex(fields[1], ":")] // "<client id>:<seq>"
			receiver = "lockkit:{told}:released:" + client
			channels = append(channels, m.Channel)
		}
		if len(channels) == 0 || len(channels) > 4 || channels[0] != receiver {
			t.Fatalf("hand-off %d told on %q, want the receiver's Client's channel %s first, and at most three others", i, channels, receiver)
		}
	}
	_ = results[waiters-1].unlock()
}
