package lock

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

// BenchmarkScripts is the two scripts of an uncontended Lock and unlock
// sent with go-redis alone, without the Client around them: compared with
// BenchmarkLockUnlock it tells the cost of the scripts in Redis from that
// of the Client.
func BenchmarkScripts(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	rk := newRedisKeys(DefaultPrefix, "bench")
	var owner, lease, claim, publish, linger any = "bench:1", DefaultLease.Milliseconds(), claimWindow.Milliseconds(), "PUBLISH", int64(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := acquireScript.run(ctx, rdb, rk.scriptArgs(owner, lease, 1, claim, 1, publish)).Err(); err != nil {
			b.Fatal(err)
		}
		if err := releaseScript.run(ctx, rdb, rk.scriptArgs(owner, 0, claim, publish, linger)).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
