package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// queued is one waiter of TestWatchersOfHandOffToDeadWaiter's queue: a
// dead one (its owner, its process gone), the one live waiter that must get
// the key, a live one that gives up (its wait limit passes) before its
// check is due, or a live one of the releasing Client itself.
type queued struct {
	dead    string
	live    bool
	givesUp bool
	own     bool
}

// A key is handed to a dead waiter at the front of the queue, and the
// releasing Client closes at once, as on a deploy: its pending check of
// the hand-off goes to every Client with a queued waiter. Whatever the
// others do, the live waiter must get the key within two claim windows ("a
// released key whose next waiters are dead or gone is obtainable within
// two claim windows", also when the releasing process closes). The cases
// where the releasing process dies instead are
// TestLiveWaiterBetweenKilledProcesses and
// TestReleaserDiesAfterHandOffToDeadWaiter.
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
			waitTaken(t, live, res, handed, 2500*time.Millisecond, "the live waiter")
		})
	}
}
