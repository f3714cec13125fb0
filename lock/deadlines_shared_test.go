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

// Guarantee (issue 33, "Deadlines +100 ms and Close ≤ 1 s as for Lock"):
// with Redis frozen, every shared call (Acquire, TryAcquire, RLock,
// TryRLock, the write Lock of a read-write lock's key, re-entries) returns
// within its context's deadline + 100 ms with ErrNotObtained and
// DeadlineExceeded; an unlock of a permit, of a read hold and of a Lock
// converted into a writer returns within its own 1 s bound + 100 ms; and
// Close returns within 1 s.
func TestSharedCallsKeepDeadlinesWhenRedisStalls(t *testing.T) {
	locktest.Timed(t)
	slack := locktest.Bound(slack)
	var semCtx, readCtx context.Context
	var unlocks []lock.UnlockFunc
	var holder *lock.Client
	_, c := stalled(t, func(c *lock.Client, rdb *redis.Client) {
		ctx := context.Background()
		sctx, su, err := c.Acquire(ctx, "sh-dl-sem", 1)
		if err != nil {
			t.Fatal(err)
		}
		rctx, ru, err := c.RLock(ctx, "sh-dl-rw")
		if err != nil {
			t.Fatal(err)
		}
		_, wu := locktest.MustLock(t, c, ctx, "sh-dl-conv")
		holder = c
		other := locktest.NewClient(t, rdb)
		go func() { _, _, _ = other.RLock(ctx, "sh-dl-conv", lock.WithMaxWait(time.Minute)) }()
		waitQueued(t, rdb, "sh-dl-conv", 1) // the Lock is the writer of a read-write lock now
		semCtx, readCtx, unlocks = sctx, rctx, []lock.UnlockFunc{su, ru, wu}
	})
	const limit = 200 * time.Millisecond
	e := func(_ context.Context, _ lock.UnlockFunc, err error) error { return err }
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Acquire of a held semaphore", func(ctx context.Context) error { return e(c.Acquire(ctx, "sh-dl-sem", 1)) }},
		{"Acquire", func(ctx context.Context) error { return e(c.Acquire(ctx, "sh-dl-other", 3)) }},
		{"TryAcquire", func(ctx context.Context) error { return e(c.TryAcquire(ctx, "sh-dl-sem", 1)) }},
		{"RLock", func(ctx context.Context) error { return e(c.RLock(ctx, "sh-dl-rw")) }},
		{"TryRLock", func(ctx context.Context) error { return e(c.TryRLock(ctx, "sh-dl-rw")) }},
		{"Lock of a read-locked key", func(ctx context.Context) error { return e(c.Lock(ctx, "sh-dl-rw")) }},
		{"Acquire with WithMaxWait", func(context.Context) error {
			return e(c.Acquire(context.Background(), "sh-dl-sem", 1, lock.WithMaxWait(limit)))
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
	for name, ctx := range map[string]context.Context{"permit": semCtx, "read hold": readCtx} {
		rctx, cancel := context.WithTimeout(ctx, limit)
		var err error
		took := timed(func() {
			if name == "permit" {
				_, _, err = c.Acquire(rctx, "sh-dl-sem", 1)
			} else {
				_, _, err = c.RLock(rctx, "sh-dl-rw")
			}
		})
		cancel()
		t.Logf("re-entry of a %s on a stalled Redis: %v after %v", name, err, took)
		if took > limit+slack {
			t.Errorf("re-entry of a %s took %v with a %v deadline", name, took, limit)
		}
	}
	for i, u := range unlocks {
		var err error
		took := timed(func() { err = u() })
		t.Logf("unlock %d on a stalled Redis: %v after %v", i, err, took)
		if took > time.Second+slack {
			t.Errorf("unlock %d (permit, read hold, converted writer) took %v, want within 1 s + 100 ms", i, took)
		}
	}
	var err error
	took := timed(func() { err = holder.Close() })
	t.Logf("Close on a stalled Redis: %v after %v", err, took)
	if took > time.Second+slack {
		t.Errorf("Close took %v on a stalled Redis, want within 1 s", took)
	}
}
