package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestClusterFullCoverageLosesEveryLock kills one master of a 3-master
// Redis Cluster without replicas, left with Redis's default
// cluster-require-full-coverage yes (node timeout 2 s), while a Client
// holds 2 locks (lease 1.5 s) on each master. Once the other masters mark
// the dead one failed, the cluster refuses every command, so the locks
// of the healthy masters are lost too: docs/scaling.md's "one master
// down loses only its locks" needs cluster-require-full-coverage no
// (TestClusterMasterDownLosesOnlyItsLocks in package lock sets it).
func TestClusterFullCoverageLosesEveryLock(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond
	cl := redistest.StartCluster(t, 3)
	var addrs []string
	for _, s := range cl.Masters {
		setNodeTimeout(t, s)
		addrs = append(addrs, s.Addr)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	c := leaseClient(t, rdb, lease)
	ctx := context.Background()

	type held struct {
		master string
		ctx    context.Context
		lost   atomic.Int64  // when ctx ended
		told   chan struct{} // closed once lost is set
	}
	var locks []*held
	perMaster := map[string]int{}
	for i := 0; len(locks) < 2*len(addrs); i++ {
		key := fmt.Sprint("coverage-", i)
		m, err := rdb.MasterForKey(ctx, "lockkit:{"+key+"}")
		if err != nil {
			t.Fatal(err)
		}
		addr := m.Options().Addr
		if perMaster[addr] == 2 {
			continue
		}
		perMaster[addr]++
		lctx, _, err := c.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		h := &held{master: addr, ctx: lctx, told: make(chan struct{})}
		context.AfterFunc(lctx, func() { h.lost.Store(now()); close(h.told) })
		locks = append(locks, h)
	}
	dead := cl.Masters[0]
	dead.Kill()
	killed := now()
	for _, h := range locks {
		select {
		case <-h.told:
		case <-time.After(15 * time.Second):
			t.Fatalf("lock on %s (dead master %s) still held 15 s after the kill", h.master, dead.Addr)
		}
		if cause := context.Cause(h.ctx); !errors.Is(cause, lock.ErrLost) {
			t.Errorf("lock on %s ended with %v, want lock.ErrLost", h.master, cause)
		}
	}
	// Back, so that go-redis stops dialling it before the test ends.
	dead.Restart()
	var first, last int64 // of the healthy masters' locks
	for _, h := range locks {
		if h.master == dead.Addr {
			continue
		}
		d := h.lost.Load() - killed
		if first == 0 || d < first {
			first = d
		}
		last = max(last, d)
	}
	t.Logf("one master of 3 killed (no replicas, cluster-require-full-coverage yes, node timeout 2 s): the 4 locks on the healthy masters lost %s to %s after the kill",
		ms(first), ms(last))
}
