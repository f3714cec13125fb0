package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (issue 33, "Close ≤ 1 s as for Lock"; no goroutine outlives
// Close): a Client holding permits, read holds and a converted writer,
// with waiters of each kind queued and hand-offs to it under way, closes
// within 1 s; its calls under way return; once its Redis client is
// closed, no goroutine of package lock is left. Runs in a process of its
// own (it checks the whole process).
func TestCloseLeavesNoGoroutineWithSharedHolds(t *testing.T) {
	if !locktest.OwnProcess(t) {
		return
	}
	srv, admin := newReal(t)
	before := lockGoroutines()
	rdb := srv.Client(t)
	c, err := lock.New(rdb, lock.WithDefaultLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	other := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	sem, rw, conv := "sh-close-s-"+randKey(), "sh-close-rw-"+randKey(), "sh-close-c-"+randKey()
	// c holds a permit and waits for another; a reader of other holds rw
	// while c waits to write and to read behind it; c holds conv as a Lock
	// that other's reader turns into a writer.
	if _, _, err := c.Acquire(ctx, sem, 1); err != nil {
		t.Fatal(err)
	}
	var waiting []<-chan struct{}
	wait := func(f func() error) {
		done := make(chan struct{})
		go func() { defer close(done); _ = f() }()
		waiting = append(waiting, done)
	}
	e := func(_ context.Context, _ lock.UnlockFunc, err error) error { return err }
	wait(func() error { return e(c.Acquire(ctx, sem, 1)) })
	waitQueued(t, admin, sem, 1)
	if _, _, err := other.RLock(ctx, rw); err != nil {
		t.Fatal(err)
	}
	wait(func() error { return e(c.Lock(ctx, rw)) })
	waitQueued(t, admin, rw, 1)
	wait(func() error { return e(c.RLock(ctx, rw)) })
	waitQueued(t, admin, rw, 2)
	locktest.MustLock(t, c, ctx, conv)
	go func() { _, _, _ = other.RLock(ctx, conv, lock.WithMaxWait(10*time.Second)) }()
	waitQueued(t, admin, conv, 1)
	time.Sleep(700 * time.Millisecond) // a renewal of every hold
	if took := timed(func() { _ = c.Close() }); took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v", took)
	}
	for _, done := range waiting {
		locktest.Within(t, done, time.Second, "a waiter after Close")
	}
	// other's reader of conv gets in once Close released c's writer.
	_, u, err := other.RLock(ctx, conv, lock.WithMaxWait(locktest.Bound(2*time.Second)))
	if err != nil {
		t.Errorf("a reader after Close released the converted writer: %v", err)
	} else {
		_ = u()
	}
	_ = other.Close()
	_ = rdb.Close()
	noNewLockGoroutinesWithin(t, before, locktest.Bound(200*time.Millisecond), "after Close and rdb.Close")
}
