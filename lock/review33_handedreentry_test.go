package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (issue 33: each permit and read hold is a lease with the
// watchdog; re-entry): a waiter handed a permit (or a read hold) by a
// release re-enters it at once, as a caller that takes the key in nested
// functions does; its hold must stay live past the claim window (its
// confirmation by the watchdog goes through) and its unlocks succeed.
//
// Observed (go test -count=1 -run TestReview33HandedHoldReentered ./lock):
// the handed hold ends with ErrLost soon after the re-entry. The re-entry
// moves the count in Redis to 2 before the watchdog confirms the hand-off;
// share.lua's confirmation (op c, count 1) then answers {2, token} (the
// count in place), and renewal.go counts a confirmation alive only when
// the answer is 1 (acquire.lua always answers 1 there). A permit, a read
// hold handed by a writer and a write hold handed by a reader all fail;
// the same steps with a plain Lock pass.
func TestReview33HandedHoldReentered(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	for _, c := range []struct{ hold, kind string }{{"p", "p"}, {"w", "r"}, {"r", "w"}} {
		kind := c.kind
		key := "r33-handre-" + randKey()
		unlock := r33Take(t, a, ctx, c.hold, key)
		type got struct {
			ctx    context.Context
			unlock lock.UnlockFunc
			err    error
		}
		ch := make(chan got, 1)
		go func() {
			lctx, u, err := r33Call(b, ctx, kind, key, lock.WithMaxWait(20*time.Second))
			if err == nil { // re-enter at once (the writer with a read hold)
				again := kind
				if kind == "w" {
					again = "r"
				}
				_, iu, ierr := r33Call(b, lctx, again, key)
				if ierr != nil {
					err = ierr
				} else {
					defer func() { _ = iu() }()
				}
			}
			ch <- got{lctx, u, err}
			time.Sleep(claimWindowR33 + 500*time.Millisecond)
		}()
		waitQueued(t, rdb, key, 1)
		waitSubscribed(t, rdb, key, 1)
		if err := unlock(); err != nil { // hands the key to b's waiter
			t.Fatal(err)
		}
		var g got
		select {
		case g = <-ch:
		case <-time.After(locktest.Bound(5 * time.Second)):
			t.Fatalf("%s: the waiter not handed the key", kind)
		}
		if g.err != nil {
			t.Fatalf("%s: the waiter or its re-entry: %v", kind, g.err)
		}
		time.Sleep(claimWindowR33 + 300*time.Millisecond)
		if g.ctx.Err() != nil {
			t.Errorf("%s: the handed hold, re-entered at once, ended: %v", kind, context.Cause(g.ctx))
		}
		_ = g.unlock()
	}
}
