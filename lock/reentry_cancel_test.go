package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Re-entry does not depend on the caller's cancellation: a context that
// holds key re-enters while the hold is live, even once it is cancelled
// (ginlock's request context after the client went away, with
// WithHoldUntilUnlock). The new level's context derives from the caller's,
// so it is done too, with the caller's cause, but it holds the key and its
// unlock releases one level: the outer level still holds.
func TestReentryOfLiveHoldIgnoresCancellation(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	other := locktest.NewClient(t, rdb)
	for _, untilUnlock := range []bool{true, false} {
		var opts []lock.LockOption
		if untilUnlock {
			opts = append(opts, lock.WithHoldUntilUnlock())
		}
		key := "reenter-cancelled-" + randKey()
		parent, cancel := context.WithCancel(context.Background())
		lctx, unlock := locktest.MustLock(t, c, parent, key, opts...)
		cancel() // the client went away
		if !errors.Is(context.Cause(lctx), context.Canceled) || !lock.Held(lctx, key) {
			t.Fatalf("untilUnlock=%v: after the caller's cancel, cause %v, held %v", untilUnlock, context.Cause(lctx), lock.Held(lctx, key))
		}
		for _, try := range []bool{false, true} {
			call := c.Lock
			if try {
				call = c.TryLock
			}
			start := time.Now()
			ictx, iunlock, err := call(lctx, key)
			if err != nil {
				t.Fatalf("untilUnlock=%v try=%v: re-entry with the cancelled holding context = %v, want the hold count up", untilUnlock, try, err)
			}
			if d := time.Since(start); d > locktest.Bound(time.Second) {
				t.Errorf("re-entry took %v", d)
			}
			if !lock.Held(ictx, key) || !errors.Is(context.Cause(ictx), context.Canceled) {
				t.Errorf("re-entered level: held %v, cause %v; want held, with the caller's cause", lock.Held(ictx, key), context.Cause(ictx))
			}
			if err := iunlock(); err != nil {
				t.Fatalf("inner unlock = %v", err)
			}
			if !lock.Held(lctx, key) {
				t.Fatal("the inner unlock ended the outer level")
			}
			if _, _, err := other.TryLock(context.Background(), key); !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("another Client's TryLock after the inner unlock = %v, want ErrNotObtained", err)
			}
		}
		if err := unlock(); err != nil {
			t.Fatalf("outer unlock = %v", err)
		}
		// A fresh acquisition with a cancelled context still fails.
		if _, _, err := c.Lock(lctx, key); !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock with a cancelled context that no longer holds = %v, want ErrNotObtained and context.Canceled", err)
		}
	}
}
