package lock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Liveness when the waiter a key was handed to is dead: the waiters told of
// the hand-off watch it, and one of them opens the next turn when the
// claim window passes unclaimed.

// A key is handed to a dead waiter at the front of the queue, and the
// releasing Client closes at once, as on a deploy: its pending check of
// the hand-off goes to every Client with a queued waiter. Whatever the
// others do, the live waiter must get the key within two claim windows ("a
// released key whose next waiters are dead or gone is obtainable within
// two claim windows", also when the releasing process closes). The cases
// where the releasing process dies instead are
// TestLiveWaiterBetweenKilledProcesses and
// TestLiveWaiterGetsKeyWhenReleaserEnds.
func TestWatchersOfHandOffToDeadWaiter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		queue []queued
	}{
		{"two dead ahead", []queued{{dead: "deadA:1"}, {dead: "deadW:1"}, {live: true}}},
		{"dead last", []queued{{dead: "deadA:1"}, {live: true}, {dead: "deadW:1"}}},
		{"watchers give up", []queued{{dead: "deadA:1"}, {givesUp: true}, {live: true}, {givesUp: true}}},
		{"releaser's own waiter last", []queued{{dead: "deadA:1"}, {live: true}, {own: true}}},
		{"receiver's process on both sides", []queued{{dead: "deadA:1"}, {dead: "deadA:2"}, {live: true}, {dead: "deadA:3"}}},
		{"one dead process on both sides", []queued{{dead: "deadA:1"}, {dead: "deadB:1"}, {live: true}, {dead: "deadB:2"}}},
		{"two dead processes on both sides", []queued{{dead: "deadA:1"}, {dead: "deadB:1"}, {live: true}, {dead: "deadC:1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "watchers-" + randKey()
			holder, err := lock.New(srv.Client(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = holder.Close() })
			_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))

			var live, gone <-chan struct{}
			var res *lockResult
			var ended []<-chan struct{} // waiters that give up or that Close ends
			subscribed := 0
			for i, w := range tc.queue {
				switch {
				case w.dead != "":
					queueDeadWaiter(t, rdb, key, w.dead)
				case w.own:
					gone, _ = lockAsync(holder, ctx, key)
					ended = append(ended, gone)
				case w.givesUp:
					gone, _ = lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(700*time.Millisecond))
					ended = append(ended, gone)
				default:
					live, res = lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
				}
				waitQueued(t, rdb, key, int64(i+1))
				if w.dead == "" {
					subscribed++
					waitSubscribed(t, rdb, key, subscribed)
				}
			}
			time.Sleep(50 * time.Millisecond) // the attempts after the subscriptions made

			if err := unlock(); err != nil {
				t.Fatal(err)
			}
			handed := time.Now()
			_ = holder.Close()
			if o := ownerIn(t, rdb, key); o != tc.queue[0].dead {
				t.Fatalf("premise: the key went to %q, want %s", o, tc.queue[0].dead)
			}
			for _, done := range ended {
				locktest.Within(t, done, 2*time.Second, "a waiter giving up or ended by Close")
			}
			if d := time.Since(handed); d > locktest.Bound(time.Second) {
				t.Fatalf("premise: the waiters gave up %v after the hand-off, after their checks were due", d)
			}
			waitTaken(t, live, res, handed, twoWindows(), "the live waiter")
		})
	}
}

// A waiter gives up while the key is handed to it (it has not heard of
// the hand-off yet: its pub/sub path is slow). Its Client takes it out of
// the queue with leave.lua, which hands the key on to the next waiter, here
// one whose process is dead. No release made that hand-off, so no
// releasing Client checks it: leave.lua tells every Client with a queued
// waiter. A live waiter of a third Client behind it must still get the key
// within two claim windows, also with the dead process's waiters on both
// sides of it.
func TestLeaveHandingToDeadWaiterReachesLiveWaiter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		ahead, last []string // dead waiters queued before and after the live one
	}{
		{"one dead waiter", []string{"dead:1"}, nil},
		{"dead waiters around the live one", []string{"dead:1", "dead:2"}, []string{"dead:3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "ho-leave-handoff-" + randKey()
			holder := locktest.NewClient(t, srv.Client(t))
			gate := newPubsubGate()
			grdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: gate.dialer})
			t.Cleanup(func() { _ = grdb.Close() })
			quitter := locktest.NewClient(t, grdb)
			t.Cleanup(gate.release) // before the Clients close

			_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
			qctx, cancel := context.WithCancel(ctx)
			defer cancel()
			qdone, qres := lockAsync(quitter, qctx, key)
			waitQueued(t, rdb, key, 1)
			for _, o := range tc.ahead {
				queueDeadWaiter(t, rdb, key, o)
			}
			wdone, wres := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
			waitQueued(t, rdb, key, int64(2+len(tc.ahead)))
			for _, o := range tc.last {
				queueDeadWaiter(t, rdb, key, o)
			}
			waitSubscribed(t, rdb, key, 2)
			time.Sleep(50 * time.Millisecond)

			gate.shut()
			if err := unlock(); err != nil { // to the quitter, which does not hear of it
				t.Fatal(err)
			}
			released := time.Now()
			time.Sleep(300 * time.Millisecond)
			cancel()
			locktest.Within(t, qdone, 2*time.Second, "the quitter")
			if qres.err == nil {
				t.Fatal("premise: the quitter got the key although its pub/sub was held back")
			}
			deadline := time.Now().Add(2 * time.Second)
			for ownerIn(t, rdb, key) != "dead:1" {
				if time.Now().After(deadline) {
					t.Fatalf("the quitter's leave did not hand the key to the dead waiter (owner %q)", ownerIn(t, rdb, key))
				}
				time.Sleep(5 * time.Millisecond)
			}
			handed := time.Now()
			t.Logf("quitter gave up %v after the release; dead waiter handed the key %v after it", handed.Sub(released)-300*time.Millisecond, handed.Sub(released))
			gate.release()
			waitTaken(t, wdone, wres, handed, twoWindows(), "live waiter of a third Client")
		})
	}
}

// A waiter whose last attempt was told of a hold that ends within a claim
// window is not told of a hand-off (no watcher message): it tries by itself
// within the window, finds the key handed on, and tries again when that
// window ends. Here the key is handed to a waiter in another process, the
// live waiter queues behind it (told the window), and that process at once
// hands the key on to a waiter whose process is dead and exits; the first
// releaser has exited too. The live waiter must still get the key within
// two claim windows of the second hand-off.
func TestWaiterToldShortHoldWatchesHandOffs(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	const key = "ho-watcher-by-timer"
	base := "lockkit:{" + key + "}"
	first := startReleaser(t, srv.Addr, key)
	first.held(t)
	second := startReleaser(t, srv.Addr, key)
	waitQueued(t, rdb, key, 1)
	waitSubscribed(t, rdb, key, 1)
	time.Sleep(50 * time.Millisecond) // its attempt after the subscription made
	first.release(t)                  // hands the key to second, for the claim window
	second.held(t)

	done, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 2) // second stays first until it confirms
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.LInsert(ctx, base+":queue", "AFTER", ownerIn(t, rdb, key), "dead:1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, base+":waits", "dead:1", now.Add(time.Minute).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	sub := rdb.PSubscribe(ctx, base+":released:*")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	second.release(t) // hands the key to the dead waiter and exits
	handed := time.Now()
	if o := ownerIn(t, rdb, key); o != "dead:1" {
		t.Fatalf("premise: the second release handed the key to %q, want dead:1 (within its window: %v)", o, time.Since(now))
	}
	for {
		msg, err := sub.ReceiveTimeout(ctx, 100*time.Millisecond)
		if err != nil {
			break
		}
		if m, ok := msg.(*redis.Message); ok && strings.Contains(m.Payload, " dead:1 ") && m.Channel != base+":released:dead" {
			t.Fatalf("premise: the hand-off to dead:1 was told on %s (%q): a watcher message", m.Channel, m.Payload)
		}
	}
	waitTaken(t, done, res, handed, twoWindows(), "the waiter told a short hold")
}
