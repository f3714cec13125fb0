package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// waitSubscribed waits until n Clients listen for hand-offs of key (each
// on its own channel), so a test knows the waiters are asleep.
func waitSubscribed(t *testing.T, rdb *redis.Client, key string, n int) {
	t.Helper()
	locktest.Eventually(t, 5*time.Second, fmt.Sprintf("%d Clients subscribed for %q", n, key), func() bool {
		return subscribers(t, rdb, key) == n
	})
}

// subscribers is the number of Clients listening for hand-offs of key
// (in quorum mode, 1 while any Client listens on the key's channel).
func subscribers(t *testing.T, rdb *redis.Client, key string) int {
	t.Helper()
	chans, err := rdb.PubSubChannels(context.Background(), "lockkit:{"+key+"}:released*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(chans)
}

// lockAsync runs Lock in a goroutine; the returned channel is closed when
// it returned, and *res holds its outcome.
type lockResult struct {
	ctx    context.Context
	unlock lock.UnlockFunc
	err    error
	at     time.Time
}

func lockAsync(c *lock.Client, ctx context.Context, key string, opts ...lock.LockOption) (<-chan struct{}, *lockResult) {
	done := make(chan struct{})
	res := &lockResult{}
	go func() {
		defer close(done)
		res.ctx, res.unlock, res.err = c.Lock(ctx, key, opts...)
		res.at = time.Now()
	}()
	return done, res
}

// acquired waits for the Lock started by lockAsync to return, fails the
// test unless it got the lock, and unlocks it when the test ends.
func acquired(t *testing.T, done <-chan struct{}, res *lockResult, what string) {
	t.Helper()
	locktest.Within(t, done, 5*time.Second, what)
	if res.err != nil {
		t.Fatalf("%s: %v", what, res.err)
	}
	t.Cleanup(func() { _ = res.unlock() })
}

func TestWakeUpOnRelease(t *testing.T) {
	locktest.Timed(t)
	_, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder, ctx, "wake") // 30 s lease

	done, res := lockAsync(waiter, ctx, "wake")
	waitSubscribed(t, rdb, "wake", 1)
	waitQueued(t, rdb, "wake", 1) // its attempt was sent before the count starts
	cc := locktest.CountCommands(rdb)
	time.Sleep(300 * time.Millisecond) // asleep: the waiter must send nothing
	if n := cc.N(); n != 0 {
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
