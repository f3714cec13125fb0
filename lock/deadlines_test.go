package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Deadlines: calls return at their context's deadline or wait limit (plus
// the documented slack), with errors that say so.

// cancelDuringCall cancels the caller's context while a script call is
// under way, as a request that ends mid-call does.
type cancelDuringCall struct{ cancel context.CancelFunc }

func (h cancelDuringCall) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h cancelDuringCall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cancel()
		return ctx.Err()
	}
}

func (h cancelDuringCall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestLockWaitLimitAndCancel(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "k")
	defer unlock()

	_, _, err := c.Lock(ctx, "k", lock.WithMaxWait(50*time.Millisecond))
	if !errors.Is(err, lock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait limit: %v, want ErrNotObtained alone", err)
	}

	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, _, err = c.Lock(cctx, "k")
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx deadline: %v, want ErrNotObtained and DeadlineExceeded", err)
	}

	done, stop := context.WithCancel(ctx)
	stop()
	_, _, err = c.Lock(done, "k2")
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx: %v, want ErrNotObtained and Canceled", err)
	}
}

func TestUnlockWithCancelledContext(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx, cancel := context.WithCancel(context.Background())
	_, unlock := locktest.MustLock(t, c, ctx, "k")
	cancel()
	if err := unlock(); err != nil {
		t.Fatalf("unlock after cancel: %v", err)
	}
	if locktest.Held(t, rdb, "lockkit:{k}") {
		t.Fatal("key kept")
	}
}

func TestContextEndedDuringCall(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	rdb.AddHook(cancelDuringCall{cancel})
	c := locktest.NewClient(t, rdb)
	_, _, err := c.Lock(ctx, "k")
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock = %v, want ErrNotObtained joined with context.Canceled", err)
	}
	if len(mr.Keys()) != 0 {
		t.Fatalf("keys left: %v", mr.Keys())
	}
}

// TestOperateUnreachableRedis: every call returns the Redis error within
// its context's deadline, and changes nothing.
func TestOperateUnreachableRedis(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	srv.Pause() // accepts connections, answers nothing
	defer srv.Resume()
	calls := map[string]func(ctx context.Context) error{
		"Inspect":     func(ctx context.Context) error { _, err := c.Inspect(ctx, "k"); return err },
		"ForceUnlock": func(ctx context.Context) error { _, err := c.ForceUnlock(ctx, "k"); return err },
		"Held": func(ctx context.Context) error {
			for _, err := range c.List(ctx, "*") {
				return err
			}
			return nil
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || took > locktest.Bound(300*time.Millisecond) {
			t.Errorf("%s on a stalled Redis: %v after %v, want the deadline's error within 200 ms + 100 ms", name, err, took)
		}
	}
}

// TestOperatorCallsBoundedWhenRedisStalls: Inspect, Held and ForceUnlock
// return within their context's deadline (+100 ms) while Redis does not
// answer.
func TestOperatorCallsBoundedWhenRedisStalls(t *testing.T) {
	locktest.Timed(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "k")
	defer unlock()
	srv.Pause()
	defer srv.Resume()
	const limit = 300 * time.Millisecond
	for name, call := range map[string]func(context.Context) error{
		"Inspect": func(ctx context.Context) error { _, err := c.Inspect(ctx, "k"); return err },
		"ForceUnlock": func(ctx context.Context) error {
			_, err := locktest.NewClient(t, rdb).ForceUnlock(ctx, "k")
			return err
		},
		"Held": func(ctx context.Context) error {
			for _, err := range c.List(ctx, "*") {
				if err != nil {
					return err
				}
			}
			return nil
		},
	} {
		cctx, cancel := context.WithTimeout(ctx, limit)
		start := time.Now()
		err := call(cctx)
		took := time.Since(start)
		cancel()
		if bound := limit + locktest.Bound(100*time.Millisecond); err == nil || took > bound {
			t.Errorf("%s on a stalled Redis: %v after %v, want an error within %v", name, err, took, bound)
		}
	}
}

// TestDeadlinesRightAfterNewOnStalledRedis (guarantee 7, "calls keep their
// deadlines, even when Redis stalls", and New's 50 ms): Redis is frozen
// before New. New returns within 50 ms + 100 ms, Lock and TryLock with a
// 300 ms deadline within it + 100 ms, Close within 1 s; once Close
// returned and rdb is closed, no goroutine of the Client is left.
func TestDeadlinesRightAfterNewOnStalledRedis(t *testing.T) {
	if !locktest.OwnProcessTimed(t) { // checks the goroutines of the whole process
		return
	}
	srv, _ := newReal(t)
	before := lockGoroutines()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	srv.Pause()
	defer srv.Resume()
	var c *lock.Client
	took := timed(func() {
		var err error
		c, err = lock.New(rdb, lock.WithDefaultLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
	})
	if took > 50*time.Millisecond+locktest.Bound(100*time.Millisecond) {
		t.Errorf("New on a stalled Redis took %v, want <= 50 ms + 100 ms", took)
	}
	for _, try := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		call := c.Lock
		if try {
			call = c.TryLock
		}
		var err error
		took := timed(func() { _, _, err = call(ctx, "stalled-new") })
		cancel()
		if err == nil || took > 300*time.Millisecond+locktest.Bound(100*time.Millisecond) {
			t.Errorf("try=%v on a stalled Redis: %v after %v, want an error within 300 ms + 100 ms", try, err, took)
		}
	}
	took = timed(func() { _ = c.Close() })
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close on a stalled Redis took %v, want <= 1 s", took)
	}
	_ = rdb.Close()
	noNewLockGoroutinesWithin(t, before, locktest.Bound(200*time.Millisecond), "after Close and rdb.Close on a stalled Redis")
}
