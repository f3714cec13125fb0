package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (issue 33, "Fair and without polling"): a waiter that gives
// up (its wait limit passes) lets those queued behind it that now fit go
// in at once, without waiting for their own retries (the holders' leases
// are 30 s): a queued writer that gives up lets the readers behind it join
// the readers holding; a semaphore waiter that gives up lets nobody in
// (the permits are all held) but the next release reaches the waiter
// behind it.
func TestLivenessSharedWaiterGivingUpLetsOthersIn(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	c := locktest.NewClient(t, srv.Client(t))
	key := "sh-giveup-" + randKey()
	_, ru, err := a.RLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer ru()
	wdone, wres := lockAsync(b, ctx, key, lock.WithMaxWait(time.Second))
	waitQueued(t, rdb, key, 1)
	rdone := make(chan struct{})
	var rerr error
	var rat time.Time
	go func() {
		defer close(rdone)
		var u lock.UnlockFunc
		_, u, rerr = c.RLock(ctx, key, lock.WithMaxWait(20*time.Second))
		rat = time.Now()
		if rerr == nil {
			_ = u()
		}
	}()
	waitQueued(t, rdb, key, 2)
	locktest.Within(t, wdone, locktest.Bound(3*time.Second), "the writer giving up")
	if !errors.Is(wres.err, lock.ErrNotObtained) {
		t.Fatalf("the writer: %v, want ErrNotObtained", wres.err)
	}
	gaveUp := time.Now()
	locktest.Within(t, rdone, locktest.Bound(2*time.Second), "the reader behind the writer that gave up")
	if rerr != nil {
		t.Fatal(rerr)
	}
	if d := rat.Sub(gaveUp); d > locktest.Bound(200*time.Millisecond) {
		t.Errorf("the reader got in %v after the writer ahead of it gave up", d)
	}

	sem := "sh-giveup-s-" + randKey()
	_, su, err := a.Acquire(ctx, sem, 1)
	if err != nil {
		t.Fatal(err)
	}
	gdone := make(chan struct{})
	go func() {
		defer close(gdone)
		_, _, _ = b.Acquire(ctx, sem, 1, lock.WithMaxWait(500*time.Millisecond))
	}()
	waitQueued(t, rdb, sem, 1)
	sdone := make(chan struct{})
	var serr error
	var sat time.Time
	go func() {
		defer close(sdone)
		var u lock.UnlockFunc
		_, u, serr = c.Acquire(ctx, sem, 1, lock.WithMaxWait(20*time.Second))
		sat = time.Now()
		if serr == nil {
			_ = u()
		}
	}()
	waitQueued(t, rdb, sem, 2)
	locktest.Within(t, gdone, locktest.Bound(3*time.Second), "the semaphore waiter giving up")
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	if err := su(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, sdone, locktest.Bound(2*time.Second), "the semaphore waiter behind the one that gave up")
	if serr != nil {
		t.Fatal(serr)
	}
	if d := sat.Sub(released); d > locktest.Bound(200*time.Millisecond) {
		t.Errorf("the semaphore waiter got in %v after the release", d)
	}
}
