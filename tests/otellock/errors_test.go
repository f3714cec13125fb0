package otellock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// wantErrorType runs one call (locker's Lock or TryLock) of key
// "orders:42" under a deadline d from now, which must fail, and checks the
// outcome and the error.type ("" for none) of its lock.acquire span.
func wantErrorType(t *testing.T, tel *telemetry, d time.Duration, call func(context.Context, string, ...lock.LockOption) (context.Context, lock.UnlockFunc, error), outcome, errorType string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if _, _, err := call(ctx, "orders:42"); err == nil {
		t.Fatal("the call succeeded")
	}
	s := tel.only(t, "lock.acquire")
	got, et := attr(t, s, aAcquireOutcome).AsString(), ""
	if hasAttr(s, aErrorType) {
		et = attr(t, s, aErrorType).AsString()
	}
	if got != outcome || et != errorType {
		t.Errorf("outcome %q, error.type %q; want %q, %q", got, et, outcome, errorType)
	}
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
		wantErrorType(t, tel, 3*time.Second, locker.Lock, "error", "redis.ErrClosed")
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
		wantErrorType(t, tel, 3*time.Second, locker.Lock, "error", "OOM")
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
		wantErrorType(t, tel, 3*time.Second, locker.TryLock, "error", "timeout")
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
		wantErrorType(t, tel, 3*time.Second, locker.TryLock, "error", "redis.ErrPoolTimeout")
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
		wantErrorType(t, tel, 300*time.Millisecond, locker.TryLock, "error", "context.DeadlineExceeded")
	})
}
