package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// With 2 of 5 quorum nodes down (stopped, and frozen) no call waits out the
// node timeout: a call returns as soon as a majority has answered, and
// nodes that failed repeatedly are left alone for a while, probed now and
// then. Before, every call waited the node timeout for the dead nodes.
func TestQuorumMinorityDownDoesNotSlowCalls(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srvs, clients := quorumOf(t, 5)
	const nodeTimeout = 500 * time.Millisecond
	c, err := lock.NewQuorum(clients(), lock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	srvs[0].Stop()
	srvs[1].Pause() // a frozen node: connections stay open, nothing answers
	t.Cleanup(srvs[1].Resume)
	ctx := context.Background()
	var slowest time.Duration
	start := time.Now()
	const pairs = 200
	for i := range pairs {
		t0 := time.Now()
		lctx, unlock, err := c.Lock(ctx, "down", lock.WithMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("pair %d: Lock with 3 of 5 nodes up: %v", i, err)
		}
		if !lock.Held(lctx, "down") {
			t.Fatalf("pair %d: not held", i)
		}
		if err := unlock(); err != nil {
			t.Fatalf("pair %d: unlock: %v", i, err)
		}
		d := time.Since(t0)
		if d >= nodeTimeout {
			t.Fatalf("pair %d took %v: a call waited out the %v node timeout of a dead node", i, d, nodeTimeout)
		}
		slowest = max(slowest, d)
	}
	t.Logf("%d pairs with 2 of 5 nodes down in %v, slowest %v (node timeout %v)", pairs, time.Since(start), slowest, nodeTimeout)
}

// BenchmarkQuorum is an uncontended Lock and unlock over 5 quorum nodes,
// all up or with 2 of them down (one stopped, one frozen).
func BenchmarkQuorum(b *testing.B) {
	for _, down := range []int{0, 2} {
		b.Run(map[int]string{0: "all-up", 2: "two-down"}[down], func(b *testing.B) {
			var rdbs []redis.UniversalClient
			var srvs []*redistest.Server
			for range 5 {
				s := redistest.Start(b)
				srvs = append(srvs, s)
				rdbs = append(rdbs, s.Client(b))
			}
			c, err := lock.NewQuorum(rdbs)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if down > 0 {
				srvs[0].Stop()
				srvs[1].Pause()
				defer srvs[1].Resume()
			}
			lockUnlockLoop(b, c)
		})
	}
}
