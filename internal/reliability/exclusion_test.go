package reliability_test

import (
	"slices"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
)

// Shape of every multi-process run.
const (
	workers          = 4
	clientsPerWorker = 3
)

// workload returns the configurations of workers that share sections
// equally, locking key through dial[i] (worker i's way to the locks'
// Redis) and incrementing the stores on the Redis at store.
func workload(key string, dial []lockRedis, store string, sections int, lease time.Duration) []workerConfig {
	var cfgs []workerConfig
	for i := range workers {
		cfgs = append(cfgs, workerConfig{
			ID:       i,
			Redis:    dial[i],
			Store:    store,
			Key:      key,
			Clients:  clientsPerWorker,
			Sections: sections / workers,
			Lease:    lease,
			Deadline: 90 * time.Second,
		})
	}
	return cfgs
}

// TestMutualExclusion runs critical sections on one key from 4 processes
// with 3 Clients each: 2,000 on one Redis, 500 in quorum mode over 3
// (Redlock is slower under contention: contenders split the votes and
// retry). No fault is injected: every section must succeed (in quorum
// mode a Lock may fail when a majority of nodes does not answer within the
// node timeout on this loaded machine; the worker then tries again), none
// may overlap another, fencing tokens (on one Redis) must increase in
// entry order, no write may be stale and no increment lost.
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		nodes    int
		sections int
	}{
		{"single", 1, 2000},
		{"quorum of 3", 3, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var addrs []string
			for range tc.nodes {
				addrs = append(addrs, redistest.Start(t).Addr)
			}
			r := &faultRun{store: redistest.Start(t)}
			dial := slices.Repeat([]lockRedis{{Nodes: addrs}}, workers)
			recs := startFleet(t, workload("exclusion", dial, r.store.Addr, tc.sections, 2*time.Second)).wait(t, 2*time.Minute)
			rep := analyse(recs)
			rep.countStores(r.stores(t))
			t.Logf("%s: %v", tc.name, rep)
			n, _, worst := overtakes(recs, 0)
			t.Logf("%s: %d sections entered before one whose Lock began earlier, by %s at most", tc.name, n, ms(worst))
			rep.logErrors(t)
			rep.requireSafe(t)
			quorum := tc.nodes > 1
			if rep.sections != tc.sections || rep.failed != 0 || rep.lost != 0 || (rep.lockErrs != 0 && !quorum) {
				t.Errorf("want %d sections done and no failure, loss or (on one Redis) Lock error", tc.sections)
			}
			for _, r := range recs {
				if r.Kind == "section" && r.Fenced == quorum {
					t.Fatalf("FencingToken ok = %v in %s mode", r.Fenced, tc.name)
				}
			}
			if rep.sets != tc.sections || (rep.fenceSets != tc.sections && !quorum) {
				t.Errorf("stores took %d and %d writes, want %d each (the fenced store none in quorum mode)", rep.sets, rep.fenceSets, tc.sections)
			}
		})
	}
}
