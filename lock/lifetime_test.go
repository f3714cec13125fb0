package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestReenterLostHold(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	lctx, unlock := locktest.MustLock(t, c, context.Background(), "k", lock.WithFixedLease(50*time.Millisecond))
	if cause := locktest.Cause(t, lctx, 2*time.Second); cause != lock.ErrLost {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	for _, ctx := range []context.Context{lctx, context.WithoutCancel(lctx)} {
		if _, _, err := c.Lock(ctx, "k"); !errors.Is(err, lock.ErrLost) {
			t.Fatalf("re-entering a lost hold = %v, want ErrLost", err)
		}
		if lock.Held(ctx, "k") {
			t.Fatal("Held after loss")
		}
		if _, ok := lock.FencingToken(ctx, "k"); ok {
			t.Fatal("FencingToken ok after loss")
		}
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("unlock of a lost hold = %v, want ErrLost", err)
	}
}

// A re-entry through a context that outlives its level's unlock either
// re-enters (before the unlock) or contends like any other caller (after
// it): it never sees an internal error.
func TestReenterRacingUnlock(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	for i := 0; i < 300; i++ {
		lctx, unlock := locktest.MustLock(t, c, context.Background(), "race")
		detached := context.WithoutCancel(lctx)
		errc := make(chan error, 1)
		go func() {
			_, unlockInner, err := c.Lock(detached, "race", lock.WithMaxWait(2*time.Second))
			if err == nil {
				err = unlockInner()
				if errors.Is(err, lock.ErrNotHeld) {
					err = nil // the outer unlock ended this level first
				}
			}
			errc <- err
		}()
		if err := unlock(); err != nil {
			t.Fatalf("round %d: unlock: %v", i, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("round %d: re-entry racing the unlock: %v", i, err)
		}
	}
}

func TestUnlockOuterFirstEndsInner(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	outer, unlockOuter := locktest.MustLock(t, c, context.Background(), "k")
	inner, unlockInner := locktest.MustLock(t, c, outer, "k")
	sibling, unlockSibling := locktest.MustLock(t, c, outer, "k")
	if err := unlockSibling(); err != nil {
		t.Fatal(err)
	}
	if !lock.Held(inner, "k") || sibling.Err() == nil {
		t.Fatal("unlocking one inner level affected another")
	}

	if err := unlockOuter(); err != nil {
		t.Fatalf("unlock outer: %v", err)
	}
	if cause := context.Cause(inner); !errors.Is(cause, lock.ErrNotHeld) {
		t.Fatalf("inner level's cause = %v, want one matching ErrNotHeld", cause)
	}
	if lock.Held(inner, "k") || lock.Held(outer, "k") {
		t.Fatal("Held after the outer level was unlocked")
	}
	if locktest.Held(t, rdb, "lockkit:{k}") {
		t.Fatal("key kept after every level ended")
	}
	if err := unlockInner(); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("unlock of an ended inner level = %v, want ErrNotHeld", err)
	}
}

func TestHoldUntilUnlock(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv, rdb := newReal(t)
	_ = srv
	c := locktest.NewClient(t, rdb)
	const lease = 300 * time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	lctx, unlock := locktest.MustLock(t, c, ctx, "work", lock.WithLease(lease), lock.WithHoldUntilUnlock())
	token, _ := lock.FencingToken(lctx, "work")
	cancel() // the client went away; the work goes on
	if cause := locktest.Cause(t, lctx, time.Second); cause != context.Canceled {
		t.Fatalf("cause = %v, want context.Canceled", cause)
	}
	time.Sleep(4 * lease) // several leases: only renewals keep the key
	work := context.WithoutCancel(lctx)
	if !lock.Held(work, "work") {
		t.Fatal("Held = false while the hold lives")
	}
	if got, ok := lock.FencingToken(work, "work"); !ok || got != token {
		t.Fatalf("FencingToken = %d, %v; want %d, true", got, ok, token)
	}
	if _, _, err := c.TryLock(context.Background(), "work"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("another caller's TryLock = %v, want ErrNotObtained", err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if locktest.Held(t, rdb, "lockkit:{work}") {
		t.Fatal("key kept after unlock")
	}
}

// Without WithHoldUntilUnlock, renewal stops when the caller's context
// ends and the lease lapses; the hold then reports so everywhere.
func TestParentDoneLeaseLapses(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	const lease = 300 * time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	lctx, unlock := locktest.MustLock(t, c, ctx, "lapse", lock.WithLease(lease))
	work := context.WithoutCancel(lctx)
	cancel()
	locktest.Eventually(t, 3*lease, "Held false after the caller's context ended", func() bool { return !lock.Held(work, "lapse") })
	if _, ok := lock.FencingToken(work, "lapse"); ok {
		t.Fatal("FencingToken ok after the lease lapsed")
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("unlock after the lease lapsed = %v, want ErrLost", err)
	}
	if _, unlock2, err := c.TryLock(context.Background(), "lapse"); err != nil {
		t.Fatalf("key not free after the lease lapsed: %v", err)
	} else {
		_ = unlock2()
	}
}
