package lock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Redis Cluster: semaphores on keys of every master keep their limit,
// hand permits over through sharded pub/sub and renew their leases.
func TestClusterSemaphoreLimitAndRenewals(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	cl := redistest.StartCluster(t, 3)
	keys := spreadKeys(t, cl.Client(t), 3, 1)
	var clients []*lock.Client
	for range 3 {
		clients = append(clients, locktest.NewClient(t, cl.Client(t), lock.WithDefaultLease(time.Second)))
	}
	const limit = 2
	ctx := context.Background()
	// One permit of each key held for two and a half leases: renewed on
	// every master.
	var long []context.Context
	for _, k := range keys {
		lctx, unlock, err := clients[0].Acquire(ctx, k, limit)
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		long = append(long, lctx)
	}
	// Nine workers share the other permit of each key meanwhile, so
	// every permit given back goes to a waiter (a hand-off).
	var wg sync.WaitGroup
	var over, runs atomic.Int64
	in := make([]atomic.Int64, len(keys))
	deadline := time.Now().Add(2500 * time.Millisecond)
	for g := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := g % len(keys)
			for time.Now().Before(deadline) {
				_, unlock, err := clients[g%3].Acquire(ctx, keys[i], limit, lock.WithMaxWait(5*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				if in[i].Add(1) > limit-1 { // one permit is the long holder's
					over.Add(1)
				}
				time.Sleep(10 * time.Millisecond)
				in[i].Add(-1)
				_ = unlock()
				runs.Add(1)
			}
		}()
	}
	wg.Wait()
	for i, lctx := range long {
		if lctx.Err() != nil {
			t.Errorf("%s's long permit lost: %v", keys[i], context.Cause(lctx))
		}
	}
	if over.Load() > 0 {
		t.Errorf("%d times more than %d holders", over.Load(), limit)
	}
	if runs.Load() < int64(locktest.Least(30)) {
		t.Errorf("only %d permits in 2.5 s", runs.Load())
	}
	t.Logf("%d permits in 2.5 s", runs.Load())
}
