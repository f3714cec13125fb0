package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// A hand-off tells two watchers, the waiter right behind the receiver and
// the last one, so that one dead does not leave it unchecked. Here the two
// waiters at the front of the queue are dead (their processes gone) and a
// live waiter of a third Client is queued behind them. The holder unlocks
// (the key goes to the first dead waiter) and closes its Client at once,
// as on a deploy, so its own check is gone too: the live waiter, the last
// one, must still get the key within two claim windows ("a released key
// whose next waiters are dead or gone is obtainable within two claim
// windows", also when the releasing process closes).
func TestTwoDeadWaitersAheadWhenReleaserCloses(t *testing.T) {
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "two-dead-" + randKey()
	base := "lockkit:{" + key + "}"

	holder, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
	queueDeadWaiter(t, rdb, key, "deadA:1")
	queueDeadWaiter(t, rdb, key, "deadW:1")
	cL := locktest.NewClient(t, srv.Client(t))
	dL, rL := lockAsync(cL, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 3)
	waitSubscribed(t, rdb, key, 1)
	time.Sleep(50 * time.Millisecond)

	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	handed := time.Now()
	_ = holder.Close()
	if o := ownerIn(t, rdb, key); o != "deadA:1" {
		t.Fatalf("premise: hand-off went to %q", o)
	}
	t.Logf("queue: %v", rdb.LRange(ctx, base+":queue", 0, -1).Val())
	waitTaken(t, dL, rL, handed, 2500*time.Millisecond, "live waiter behind two dead ones")
}

// The last queued waiter is dead; the key is handed to a dead waiter at the
// front, and the releasing Client closes at once. The live waiter between
// them, right behind the receiver, is told and gets the key within two
// claim windows.
func TestDeadLastWaiterIsNotTheOnlyWatcher(t *testing.T) {
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "dead-last-" + randKey()

	holder, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
	queueDeadWaiter(t, rdb, key, "deadA:1")
	cL := locktest.NewClient(t, srv.Client(t))
	dL, rL := lockAsync(cL, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 2)
	waitSubscribed(t, rdb, key, 1)
	queueDeadWaiter(t, rdb, key, "deadW:1") // joined last; its process died since
	time.Sleep(50 * time.Millisecond)

	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	handed := time.Now()
	_ = holder.Close()
	if o := ownerIn(t, rdb, key); o != "deadA:1" {
		t.Fatalf("premise: hand-off went to %q", o)
	}
	waitTaken(t, dL, rL, handed, 2500*time.Millisecond, "live waiter between two dead ones")
}

// Both watchers told of a hand-off to a dead waiter are alive but stop
// waiting (their wait limits pass) before their checks are due, a claim
// window after the hand-off; the releasing Client closed right after
// releasing. A waiter that leaves while the key is handed to one that has
// not confirmed has the watchers told again: the live waiter between them
// must still get the key within two claim windows ("whatever other
// waiters do").
func TestWatcherGivingUpKeepsTheCheck(t *testing.T) {
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "leaving-watchers-" + randKey()

	holder, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
	queueDeadWaiter(t, rdb, key, "deadA:1")
	var gone []<-chan struct{}
	var live <-chan struct{}
	var res *lockResult
	for i, limit := range []time.Duration{700 * time.Millisecond, holderLease + 3*time.Second, 700 * time.Millisecond} {
		done, r := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(limit))
		if limit < time.Second {
			gone = append(gone, done)
		} else {
			live, res = done, r
		}
		waitQueued(t, rdb, key, int64(i+2))
		waitSubscribed(t, rdb, key, i+1)
	}
	time.Sleep(50 * time.Millisecond) // the attempts after the subscriptions made

	if err := unlock(); err != nil { // to deadA:1; the waiters right behind and last watch
		t.Fatal(err)
	}
	handed := time.Now()
	_ = holder.Close()
	if o := ownerIn(t, rdb, key); o != "deadA:1" {
		t.Fatalf("premise: hand-off went to %q", o)
	}
	for _, done := range gone {
		within(t, done, 2*time.Second, "a watcher giving up")
	}
	if d := time.Since(handed); d > time.Second {
		t.Fatalf("premise: the watchers gave up %v after the hand-off, after their checks were due", d)
	}
	waitTaken(t, live, res, handed, 2500*time.Millisecond, "live waiter between the watchers")
}

// A graceful shutdown: one process has a goroutine holding the key and
// another waiting for it (queued last). It unlocks (the key goes to a dead
// waiter at the front) and closes at once, which ends its own waiter; the
// live waiter of another Client, queued between, right behind the
// receiver, is told and gets the key within two claim windows.
func TestReleasersOwnWaiterIsNotTheOnlyWatcher(t *testing.T) {
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "own-watcher-" + randKey()

	holder, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
	queueDeadWaiter(t, rdb, key, "deadA:1")
	cL := locktest.NewClient(t, srv.Client(t))
	dL, rL := lockAsync(cL, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 2)
	waitSubscribed(t, rdb, key, 1)
	dO, _ := lockAsync(holder, ctx, key) // the holder's own waiter, last
	waitQueued(t, rdb, key, 3)
	waitSubscribed(t, rdb, key, 2)
	time.Sleep(50 * time.Millisecond)

	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	handed := time.Now()
	_ = holder.Close()
	within(t, dO, 2*time.Second, "the holder's own waiter at Close")
	if o := ownerIn(t, rdb, key); o != "deadA:1" {
		t.Fatalf("premise: hand-off went to %q", o)
	}
	waitTaken(t, dL, rL, handed, 2500*time.Millisecond, "live waiter of another Client")
}
