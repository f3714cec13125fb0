package lock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// BenchmarkLockUnlockContextTimeout is BenchmarkLockUnlock on a Redis
// client with go-redis's ContextTimeoutEnabled, the setting under which a
// lone call runs on its caller's goroutine (see docs/operations.md).
func BenchmarkLockUnlockContextTimeout(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = rdb.Close() })
	lockUnlockLoop(b, locktest.NewClient(b, rdb))
}
