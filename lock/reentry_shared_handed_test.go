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
// The confirmation answers its target, 1, as acquire.lua does, whatever
// the count in place (an answer of 2 was once read as a lost hold).
func TestReentryHandedSharedHoldBeforeConfirming(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	for _, c := range []struct{ hold, kind string }{{"p", "p"}, {"w", "r"}, {"r", "w"}} {
		kind := c.kind
		key := "sh-handre-" + randKey()
		unlock := sharedTake(t, a, ctx, c.hold, key)
		type got struct {
			ctx    context.Context
			unlock lock.UnlockFunc
			err    error
		}
		ch := make(chan got, 1)
		go func() {
			lctx, u, err := sharedCall(b, ctx, kind, key, lock.WithMaxWait(20*time.Second))
			if err == nil { // re-enter at once (the writer with a read hold)
				again := kind
				if kind == "w" {
					again = "r"
				}
				_, iu, ierr := sharedCall(b, lctx, again, key)
				if ierr != nil {
					err = ierr
				} else {
					defer func() { _ = iu() }()
				}
			}
			ch <- got{lctx, u, err}
			time.Sleep(claimWindowShared + 500*time.Millisecond)
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
		time.Sleep(claimWindowShared + 300*time.Millisecond)
		if g.ctx.Err() != nil {
			t.Errorf("%s: the handed hold, re-entered at once, ended: %v", kind, context.Cause(g.ctx))
		}
		_ = g.unlock()
	}
}
