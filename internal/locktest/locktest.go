// Package locktest holds what the tests of lockkit's packages share: a
// real redis-server with direct reads of its data (redis.go), a lock
// Client tied to a test and a Lock that fails the test (this file), one
// way to wait for a condition (wait.go), time bounds that CI checks as
// written and a busy machine scales (timing.go), the test binary run as
// a child process (process.go), a TCP proxy that injects network faults
// (proxy.go), command counters (counters.go), the check of an HTTP
// problem answer (problem.go), and a buffer safe to share with a writer
// (buffer.go).
package locktest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// NewClient returns a lock Client closed when the test ends.
func NewClient(t testing.TB, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	c, err := lock.New(rdb, opts...)
	if err != nil {
		t.Fatalf("lock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// MustLock takes key or fails the test.
func MustLock(t testing.TB, l lock.Locker, ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc) {
	t.Helper()
	lctx, unlock, err := l.Lock(ctx, key, opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	return lctx, unlock
}

// TokenWhenLocked takes key with l in a goroutine and sends on the
// returned channel the fencing token it got once it holds key (0 after
// an error, which fails the test), then unlocks.
func TokenWhenLocked(t testing.TB, l lock.Locker, ctx context.Context, key string) <-chan uint64 {
	ch := make(chan uint64, 1)
	go func() {
		lctx, unlock, err := l.Lock(ctx, key)
		if err != nil {
			t.Errorf("Lock(%q): %v", key, err)
			ch <- 0
			return
		}
		tok, _ := lock.FencingToken(lctx, key)
		ch <- tok
		_ = unlock()
	}()
	return ch
}

// Held reports whether the lock hash name (such as "lockkit:{k}") has a
// holder in Redis: a released lock's hash stays a moment, free.
func Held(t testing.TB, rdb redis.Cmdable, name string) bool {
	t.Helper()
	n, err := rdb.HGet(context.Background(), name, "n").Int()
	switch {
	case err == redis.Nil:
		return false
	case err != nil:
		t.Fatalf("HGET %s n: %v", name, err)
	}
	return n > 0
}
