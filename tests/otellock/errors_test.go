package otellock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

// acquireErrorType runs one Lock on locker under a deadline d from now and
// returns the outcome and the error.type of its lock.acquire span, "" when
// it has none.
func acquireErrorType(t *testing.T, tel *telemetry, d time.Duration, lockIt func(ctx context.Context) error) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := lockIt(ctx); err == nil {
		t.Fatal("Lock succeeded")
	}
	s := tel.only(t, "lock.acquire")
	outcome := attr(t, s, aAcquireOutcome).AsString()
	if !hasAttr(s, aErrorType) {
		return outcome, ""
	}
	return outcome, attr(t, s, aErrorType).AsString()
}

// TestErrorTypesOfRealFailures: against a
// real redis-server, the common failures get the error.type that
// docs/observability.md lists.
func TestErrorTypesOfRealFailures(t *testing.T) {
	t.Run("go-redis client closed", func(t *testing.T) {
		srv := redistest.Start(t)
		rdb := srv.Client(t)
		tel := newTelemetry(t)
		locker := tel.locker(t, rdb)
		_ = rdb.Close()
		outcome, et := acquireErrorType(t, tel, 3*time.Second, func(ctx context.Context) error {
			_, _, err := locker.Lock(ctx, "orders:42")
			return err
		})
		if outcome != "error" || et != "redis.ErrClosed" {
			t.Errorf("outcome %q, error.type %q; want error, redis.ErrClosed", outcome, et)
		}
	})
	t.Run("OOM", func(t *testing.T) {
		srv := redistest.Start(t, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
		rdb := srv.Client(t)
		// Fill Redis past maxmemory: writes are then refused.
		big := strings.Repeat("x", 1<<20)
		for i := 0; i < 8; i++ {
			if err := rdb.Set(context.Background(), "filler:"+string(rune('a'+i)), big, 0).Err(); err != nil {
				break
			}
		}
		tel := newTelemetry(t)
		locker := tel.locker(t, rdb)
		outcome, et := acquireErrorType(t, tel, 3*time.Second, func(ctx context.Context) error {
			_, _, err := locker.Lock(ctx, "orders:42")
			return err
		})
		if outcome != "error" || et != "OOM" {
			t.Errorf("outcome %q, error.type %q; want error, OOM", outcome, et)
		}
	})
	t.Run("Redis stalled, read timeout", func(t *testing.T) {
		srv := redistest.Start(t)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		tel := newTelemetry(t)
		locker := tel.locker(t, rdb)
		if err := rdb.Ping(context.Background()).Err(); err != nil { // a connection in the pool
			t.Fatal(err)
		}
		srv.Pause()
		defer srv.Resume()
		outcome, et := acquireErrorType(t, tel, 3*time.Second, func(ctx context.Context) error {
			_, _, err := locker.TryLock(ctx, "orders:42")
			return err
		})
		if outcome != "error" || et != "timeout" {
			t.Errorf("outcome %q, error.type %q; want error, timeout", outcome, et)
		}
	})
	t.Run("pool exhausted", func(t *testing.T) {
		srv := redistest.Start(t)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, PoolTimeout: 100 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		tel := newTelemetry(t)
		locker := tel.locker(t, rdb)
		go func() { _ = rdb.BLPop(context.Background(), time.Second, "nothing").Err() }() // the only connection, for 1 s
		for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
			if st := rdb.PoolStats(); st.TotalConns == 1 && st.IdleConns == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("BLPOP did not take the connection within 1 s")
			}
		}
		outcome, et := acquireErrorType(t, tel, 3*time.Second, func(ctx context.Context) error {
			_, _, err := locker.TryLock(ctx, "orders:42")
			return err
		})
		if outcome != "error" || et != "redis.ErrPoolTimeout" {
			t.Errorf("outcome %q, error.type %q; want error, redis.ErrPoolTimeout", outcome, et)
		}
	})
	// docs/observability.md: a call whose deadline passed while a Redis
	// command was unanswered is outcome error with error.type
	// context.DeadlineExceeded; canceled is for a context that ended a
	// wait. A TryLock does not wait: cut off while Redis does not answer,
	// it is a Redis failure, and a dashboard of errors must show the stall.
	t.Run("Redis stalled, TryLock cut off by its deadline", func(t *testing.T) {
		srv := redistest.Start(t)
		rdb := srv.Client(t) // go-redis's default read timeout, 3 s
		tel := newTelemetry(t)
		locker := tel.locker(t, rdb)
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		srv.Pause()
		defer srv.Resume()
		outcome, et := acquireErrorType(t, tel, 300*time.Millisecond, func(ctx context.Context) error {
			_, _, err := locker.TryLock(ctx, "orders:42")
			return err
		})
		if outcome != "error" || et != "context.DeadlineExceeded" {
			t.Errorf("TryLock during a Redis stall: outcome %q, error.type %q; want error, context.DeadlineExceeded", outcome, et)
		}
	})
}
