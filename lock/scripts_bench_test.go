package lock

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// BenchmarkScripts is the two scripts of an uncontended Lock and unlock
// sent with go-redis alone, without the Client around them: compared with
// BenchmarkLockUnlock it tells the cost of the scripts in Redis from that
// of the Client. The owner is a labelled one, as Clients write it.
func BenchmarkScripts(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	rk := newRedisKeys(DefaultPrefix, "bench")
	// An owner as a Client with a label writes it (see clientID).
	var owner any = clientID([16]byte{}, "payments-worker-5d8f7c9b4-x2x7q", "payments-7f9c") + ":1"
	var lease, claim, publish, linger any = DefaultLease.Milliseconds(), claimWindow.Milliseconds(), "PUBLISH", int64(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := scripts.Acquire.Do(ctx, rdb, rk.scriptArgs(owner, lease, 1, claim, 1, publish)).Err(); err != nil {
			b.Fatal(err)
		}
		if err := scripts.Release.Do(ctx, rdb, rk.scriptArgs(owner, 0, claim, publish, linger)).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
