package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Deadlines when Redis stalls: Lock, TryLock, re-entry and unlock return
// within their bound although Redis does not answer.

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// Lock, TryLock and an unlock return within their context's deadline +
// 100 ms when Redis stalls, with go-redis's default timeouts,
// although the cleanup they leave must still reach Redis.
func TestCallsKeepDeadlinesWhenRedisStalls(t *testing.T) {
	locktest.Timed(t)
	slack := locktest.Bound(slack)
	var heldCtx context.Context
	var unlockHeld lock.UnlockFunc
	_, c := stalled(t, func(c *lock.Client, _ *redis.Client) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		t.Cleanup(cancel)
		heldCtx, unlockHeld = locktest.MustLock(t, c, ctx, "held")
	})
	const limit = 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Lock", func(ctx context.Context) error { _, _, err := c.Lock(ctx, "other"); return err }},
		{"Lock of a held key", func(ctx context.Context) error { _, _, err := c.Lock(ctx, "held"); return err }},
		{"TryLock", func(ctx context.Context) error { _, _, err := c.TryLock(ctx, "other"); return err }},
		{"Lock with WithMaxWait", func(ctx context.Context) error {
			_, _, err := c.Lock(context.Background(), "other", lock.WithMaxWait(limit))
			return err
		}},
		{"TryLock with WithMaxWait", func(ctx context.Context) error {
			_, _, err := c.TryLock(context.Background(), "other", lock.WithMaxWait(limit))
			return err
		}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		var err error
		took := timed(func() { err = tc.call(ctx) })
		cancel()
		t.Logf("%s on a stalled Redis: %v after %v", tc.name, err, took)
		if took > limit+slack {
			t.Errorf("%s took %v with a %v deadline", tc.name, took, limit)
		}
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s = %v, want ErrNotObtained and DeadlineExceeded", tc.name, err)
		}
	}
	tctx, cancel := context.WithTimeout(context.Background(), limit)
	var terr error
	took := timed(func() { _, terr = c.Integration().Time(tctx) })
	cancel()
	if took > limit+slack || !errors.Is(terr, context.DeadlineExceeded) {
		t.Errorf("Time on a stalled Redis: %v after %v, want DeadlineExceeded within %v", terr, took, limit)
	}
	// The held lock's context has a 300 ms deadline, which has passed or
	// passes during the unlock: the unlock waits at most 100 ms past it.
	var err error
	took = timed(func() { err = unlockHeld() })
	wait := time.Until(deadlineOf(heldCtx))
	t.Logf("unlock on a stalled Redis: %v after %v", err, took)
	if took > max(wait, 0)+slack {
		t.Errorf("unlock took %v, %v past its context's deadline", took, took-max(wait, 0))
	}
	if err == nil || errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("unlock on a stalled Redis = %v, want an error saying the release is not confirmed", err)
	}
}

// TestReentryOnStalledRedisKeepsItsBound (guarantee 7, and Lock's doc:
// "the Redis call runs until ctx's deadline + 50 ms or, without a
// deadline, for up to 1 s"): with the key held, Redis freezes and the
// holder re-enters with its live context, with a cancelled copy of it,
// with a 200 ms deadline that passed before the call, and with a 200 ms
// deadline that cuts the call off. Each call returns within its bound +
// 100 ms; the one cut off by its deadline reports ErrNotObtained joined
// with ctx.Err(), like any Lock whose context ended.
func TestReentryOnStalledRedisKeepsItsBound(t *testing.T) {
	locktest.Timed(t)
	srv, rdb := newReal(t)
	c := locktest.NewClient(t, rdb, lock.WithDefaultLease(3*time.Second))
	lctx, _ := locktest.MustLock(t, c, context.Background(), "reenter-stalled")
	srv.Pause()
	defer srv.Resume()
	cancelled, cancel := context.WithCancel(lctx)
	cancel()
	expired, cancelExpired := context.WithTimeout(lctx, 200*time.Millisecond)
	defer cancelExpired()
	given := func(ctx context.Context) func() (context.Context, context.CancelFunc) {
		return func() (context.Context, context.CancelFunc) { return ctx, func() {} }
	}
	for _, tc := range []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc) // made right before the call
		bound  time.Duration
		cutOff bool // the deadline ends the call: ErrNotObtained joined with DeadlineExceeded
	}{
		{"live, no deadline", given(lctx), time.Second, false},
		{"cancelled", given(cancelled), time.Second, false},
		{"200 ms deadline passed before the call", given(expired), 250 * time.Millisecond, false},
		{"200 ms deadline", func() (context.Context, context.CancelFunc) { return context.WithTimeout(lctx, 200*time.Millisecond) }, 200 * time.Millisecond, true},
	} {
		ctx, cancel := tc.ctx()
		var err error
		took := timed(func() { _, _, err = c.Lock(ctx, "reenter-stalled") })
		cancel()
		t.Logf("%s: re-entry on a stalled Redis: %v after %v", tc.name, err, took)
		if took > tc.bound+locktest.Bound(100*time.Millisecond) {
			t.Errorf("%s: re-entry on a stalled Redis took %v (err %v), want <= %v + 100 ms", tc.name, took, err, tc.bound)
		}
		if err == nil {
			t.Errorf("%s: re-entry on a stalled Redis succeeded", tc.name)
		}
		if tc.cutOff && (!errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded)) {
			t.Errorf("%s: re-entry cut off by its deadline = %q; want ErrNotObtained joined with context.DeadlineExceeded", tc.name, err)
		}
	}
}

// A re-entry with a 200 ms deadline returns within it + 100 ms while an
// unlock of an inner level of the same hold waits (up to 1 s) for a
// stalled Redis.
func TestReentryDeadlineNotBlockedByPendingUnlock(t *testing.T) {
	locktest.Timed(t)
	var outer context.Context
	var unlockInner lock.UnlockFunc
	_, c := stalled(t, func(c *lock.Client, _ *redis.Client) {
		outer, _ = locktest.MustLock(t, c, context.Background(), "k")
		_, unlockInner = locktest.MustLock(t, c, outer, "k")
	})
	unlocked := make(chan struct{})
	go func() {
		defer close(unlocked)
		_ = unlockInner() // waits up to 1 s for the stalled Redis
	}()
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(outer, 200*time.Millisecond)
	defer cancel()
	var err error
	took := timed(func() { _, _, err = c.Lock(ctx, "k") })
	t.Logf("re-entry with a 200 ms deadline during a pending unlock: %v after %v", err, took)
	if took > 200*time.Millisecond+locktest.Bound(slack) {
		t.Errorf("re-entry took %v with a 200 ms deadline", took)
	}
	<-unlocked
}

// An unlock waits at most 1 s for a stalled Redis when its lock context has
// no deadline, even while a re-entry of the same hold (with no deadline of
// its own, so bounded only by go-redis's timeouts and retries) is stuck in
// Redis.
func TestUnlockNotBlockedByStuckReentry(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	var held context.Context
	var unlock lock.UnlockFunc
	srv, c := stalled(t, func(c *lock.Client, _ *redis.Client) {
		held, unlock = locktest.MustLock(t, c, context.Background(), "k")
	})
	reentered := make(chan struct{})
	go func() {
		defer close(reentered)
		_, u, err := c.Lock(held, "k") // no deadline: may wait for Redis
		if err == nil {
			_ = u()
		}
	}()
	time.Sleep(50 * time.Millisecond) // the re-entry's command is in Redis
	var err error
	took := timed(func() { err = unlock() })
	t.Logf("unlock while a re-entry is stuck in a stalled Redis: %v after %v", err, took)
	if took > time.Second+locktest.Bound(slack) {
		t.Errorf("unlock took %v on a stalled Redis, want within 1 s (its context has no deadline)", took)
	}
	srv.Resume()
	if !locktest.ClosedWithin(reentered, 15*time.Second) {
		t.Error("re-entry still stuck 15 s after Redis resumed")
	}
}

// Two unlocks of one hold (inner level, then the outer one 10 ms later),
// both without a deadline: each returns within 1 s on a stalled Redis.
func TestConcurrentUnlocksEachWithinOneSecond(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	var unlockOuter, unlockInner lock.UnlockFunc
	_, c := stalled(t, func(c *lock.Client, _ *redis.Client) {
		var outer context.Context
		outer, unlockOuter = locktest.MustLock(t, c, context.Background(), "k")
		_, unlockInner = locktest.MustLock(t, c, outer, "k")
	})
	_ = c
	innerTook := make(chan time.Duration, 1)
	go func() { innerTook <- timed(func() { _ = unlockInner() }) }()
	time.Sleep(10 * time.Millisecond)
	var err error
	took := timed(func() { err = unlockOuter() })
	ti := <-innerTook
	t.Logf("stalled Redis: inner unlock %v, outer unlock %v (%v)", ti, took, err)
	if ti > time.Second+locktest.Bound(slack) || took > time.Second+locktest.Bound(slack) {
		t.Errorf("unlocks took %v (inner) and %v (outer) on a stalled Redis, want each within 1 s", ti, took)
	}
}

// TestUnlockWithAFarDeadlineWithinOneSecond: an unlock whose level's
// context has a deadline far off (an hour) returns within the release's
// own 1 s limit on a stalled Redis, as one without a deadline does; the
// release goes on in the background.
func TestUnlockWithAFarDeadlineWithinOneSecond(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var unlock lock.UnlockFunc
	stalled(t, func(c *lock.Client, _ *redis.Client) {
		_, unlock = locktest.MustLock(t, c, ctx, "far")
	})
	var err error
	took := timed(func() { err = unlock() })
	t.Logf("stalled Redis, a deadline an hour off: unlock %v (%v)", took, err)
	if took > time.Second+locktest.Bound(slack) {
		t.Errorf("unlock took %v on a stalled Redis with a deadline an hour off, want within 1 s", took)
	}
}
