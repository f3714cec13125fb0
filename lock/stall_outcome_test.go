package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestStallAfterQueuedIsNotContention: Redis stalls after the waiter was
// queued; its retry at the holder's lease end goes unanswered until the
// wait limit (or the caller's deadline) passes. Redis did not answer in
// time: outcome error joined with context.DeadlineExceeded (ginlock's
// 503), not contention. A retry cut off soon after it was sent is still
// the key held (ginlock's TestWaitEndingDuringAnsweredRetryIsAConflict):
// the line is a retry unanswered for 100 ms.
func TestStallAfterQueuedIsNotContention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		bound func(context.Context) (context.Context, context.CancelFunc, []lock.LockOption)
	}{
		{"wait limit", func(ctx context.Context) (context.Context, context.CancelFunc, []lock.LockOption) {
			return ctx, func() {}, []lock.LockOption{lock.WithMaxWait(2 * time.Second)}
		}},
		{"context deadline", func(ctx context.Context) (context.Context, context.CancelFunc, []lock.LockOption) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			return ctx, cancel, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, rdb := newReal(t)
			rec := &recorder{}
			c := locktest.NewClient(t, srv.Client(t), lock.WithObserver(rec))
			holder := locktest.NewClient(t, srv.Client(t))
			key := "stall-queued-" + randKey()
			_, unlock := locktest.MustLock(t, holder, context.Background(), key, lock.WithFixedLease(500*time.Millisecond))
			defer func() { _ = unlock() }()
			ctx, cancel, opts := tc.bound(context.Background())
			defer cancel()
			done, res := lockAsync(c, ctx, key, opts...)
			waitQueued(t, rdb, key, 1)
			srv.Pause() // the retry at the lease's end (0.5 s) is not answered
			locktest.Within(t, done, 4*time.Second, "the waiter")
			srv.Resume()
			if res.err == nil {
				_ = res.unlock()
				t.Fatal("Lock succeeded with Redis stalled")
			}
			if !errors.Is(res.err, context.DeadlineExceeded) {
				t.Errorf("error %q is not joined with context.DeadlineExceeded (Redis did not answer the retry)", res.err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if n := len(rec.acquires); n != 1 {
				t.Fatalf("%d acquire events", n)
			}
			if o := rec.acquires[0].Outcome; o != lock.OutcomeError {
				t.Errorf("outcome %v (error %q), want error: Redis did not answer the retry in time", o, res.err)
			}
		})
	}
}
