package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// TestCancelledLoneCallEndsWithinReadTimeout: the trade that
// docs/operations.md documents for ContextTimeoutEnabled: a lone call
// whose context is cancelled without a deadline while Redis does not
// answer ends "when go-redis gives up (its ReadTimeout)". Here Redis is
// stopped (SIGSTOP) and the Client's connections were dropped by earlier
// calls that timed out, so the lone call must first open a connection:
// go-redis's handshake (HELLO, CLIENT SETINFO) reads under the same
// cancelled context without a deadline. The Lock, cancelled 100 ms in,
// must return within the read timeout (1 s) + 100 ms.
func TestCancelledLoneCallEndsWithinReadTimeout(t *testing.T) {
	locktest.Timed(t)
	const readTimeout = time.Second
	for _, tc := range []struct {
		name    string
		retries int
		pool    int
	}{{"pool 1, no retries", -1, 1}, {"pool 1, default retries", 0, 1}, {"default pool and retries", 0, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := inlineClient(t, srv, redis.Options{ReadTimeout: readTimeout, WriteTimeout: readTimeout, MaxRetries: tc.retries, PoolSize: tc.pool})
			c := locktest.NewClient(t, rdb)
			if _, unlock, err := c.Lock(context.Background(), "warm"); err != nil {
				t.Fatal(err)
			} else if err := unlock(); err != nil {
				t.Fatal(err)
			}
			srv.Pause()
			defer srv.Resume()
			// A call cut off by its deadline: go-redis drops its connection.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, _, _ = c.TryLock(ctx, "cut-"+randKey())
			cancel()
			t.Logf("idle connections after the cut-off call: %d", rdb.PoolStats().IdleConns)

			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			var err error
			took := timed(func() { _, _, err = c.Lock(ctx, "k-"+randKey()) })
			t.Logf("Lock cancelled after 100 ms: %v after %v", err, took)
			if bound := readTimeout + locktest.Bound(slack); took > bound {
				t.Errorf("Lock cancelled after 100 ms returned after %v, want within the read timeout %v (bound %v)", took, readTimeout, bound)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Lock = %v, want context.Canceled", err)
			}
		})
	}
}
