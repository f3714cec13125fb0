package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Re-entry: a holder locking a key it holds gets a new level of the same
// hold; levels end with their own unlock, the hold with its outermost one.

func TestReentry(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()

	outer, unlockOuter := locktest.MustLock(t, c, ctx, "k")
	done := make(chan struct{})
	var inner context.Context
	var unlockInner lock.UnlockFunc
	go func() { // a goroutine with the held ctx acts for the holder
		defer close(done)
		inner, unlockInner = locktest.MustLock(t, c, outer, "k", lock.WithMaxWait(time.Second))
	}()
	locktest.Within(t, done, 2*time.Second, "re-entry")
	if got := countOf(t, mr, "k"); got != "2" {
		t.Fatalf("hold count = %q, want 2", got)
	}
	t1, _ := lock.FencingToken(outer, "k")
	t2, _ := lock.FencingToken(inner, "k")
	if t1 != t2 {
		t.Fatalf("re-entry token %d, outer %d: want equal", t2, t1)
	}

	// A sibling of the holder contends.
	if _, _, err := c.TryLock(ctx, "k"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("sibling TryLock = %v, want ErrNotObtained", err)
	}
	if err := unlockInner(); err != nil {
		t.Fatalf("unlock inner: %v", err)
	}
	if err := unlockInner(); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("double unlock inner = %v, want ErrNotHeld", err)
	}
	if !locktest.Held(t, rdb, "lockkit:{k}") || !lock.Held(outer, "k") {
		t.Fatal("key released before the outermost unlock")
	}
	if inner.Err() == nil {
		t.Fatal("inner ctx not cancelled by its unlock")
	}
	if err := unlockOuter(); err != nil {
		t.Fatalf("unlock outer: %v", err)
	}
	if locktest.Held(t, rdb, "lockkit:{k}") {
		t.Fatal("key kept after the outermost unlock")
	}
}

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

// A hold that was handed over re-enters like any other: the count in
// Redis follows the levels, the inner unlock keeps the key, re-entries
// share the handed-over token, and the outermost unlock hands the key on
// to the next waiter with a larger token.
func TestReentryOnHandedOverHold(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, srv.Client(t))
	next := locktest.NewClient(t, srv.Client(t))
	bg := context.Background()
	const key = "ho-reenter"
	name := "lockkit:{" + key + "}"
	hctx, unlock := locktest.MustLock(t, holder, bg, key)
	t0, _ := lock.FencingToken(hctx, key)
	wdone, wres := lockAsync(waiter, bg, key)
	waitQueued(t, rdb, key, 1)
	waitSubscribed(t, rdb, key, 1)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	acquired(t, wdone, wres, "the waiter the key was handed to")
	t1, ok := lock.FencingToken(wres.ctx, key)
	if !ok || t1 <= t0 {
		t.Fatalf("handed-over token %d (ok %v) after %d", t1, ok, t0)
	}
	ictx, iunlock, err := waiter.Lock(wres.ctx, key)
	if err != nil {
		t.Fatalf("re-entry of a handed-over hold: %v", err)
	}
	if n := rdb.HGet(bg, name, "n").Val(); n != "2" {
		t.Fatalf("hold count in Redis after the re-entry = %q, want 2", n)
	}
	if t2, _ := lock.FencingToken(ictx, key); t2 != t1 {
		t.Fatalf("re-entry token %d, want the outer one %d", t2, t1)
	}
	n0 := queueLen(t, rdb, key) // 1 while the handed-over holder stays first, else 0
	ndone, nres := lockAsync(next, bg, key, lock.WithMaxWait(10*time.Second))
	waitQueued(t, rdb, key, n0+1)
	// Past the claim window: the handed-over hold and its count are kept.
	time.Sleep(1200 * time.Millisecond)
	if err := iunlock(); err != nil {
		t.Fatalf("inner unlock: %v", err)
	}
	if n := rdb.HGet(bg, name, "n").Val(); n != "1" || !lock.Held(wres.ctx, key) {
		t.Fatalf("after the inner unlock: count %q, Held %v; want 1, true", n, lock.Held(wres.ctx, key))
	}
	select {
	case <-ndone:
		t.Fatalf("next waiter got the key while the outer level is held: %v", nres.err)
	default:
	}
	if err := wres.unlock(); err != nil {
		t.Fatalf("outer unlock: %v", err)
	}
	locktest.Within(t, ndone, 3*time.Second, "the next waiter")
	if nres.err != nil {
		t.Fatal(nres.err)
	}
	if t3, _ := lock.FencingToken(nres.ctx, key); t3 <= t1 {
		t.Fatalf("next token %d after %d", t3, t1)
	}
	if err := nres.unlock(); err != nil {
		t.Fatal(err)
	}
	if q := queueLen(t, rdb, key); q != 0 {
		t.Errorf("%d waiters left in the queue", q)
	}
}
