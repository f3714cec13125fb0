package reliability_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

// Shape of every multi-process run.
const (
	workers          = 4
	clientsPerWorker = 3
)

// workload returns the configurations of workers that share sections
// equally, locking key on nodes and incrementing the counter on store.
// nodes[i] and store[i] are what worker i dials.
func workload(key string, nodes [][]string, store []string, sections int, lease time.Duration) []workerConfig {
	var cfgs []workerConfig
	for i := range workers {
		cfgs = append(cfgs, workerConfig{
			ID:       i,
			Nodes:    nodes[i],
			Store:    store[i],
			Key:      key,
			Clients:  clientsPerWorker,
			Sections: sections / workers,
			Lease:    lease,
			Deadline: 90 * time.Second,
		})
	}
	return cfgs
}

// counter reads the value the sections incremented.
func counter(t *testing.T, addr string) int {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	n, err := rdb.Get(context.Background(), counterKey).Int()
	if err != nil {
		t.Fatalf("counter: %v", err)
	}
	return n
}

// TestMutualExclusion runs critical sections on one key from 4 processes
// with 3 Clients each: 2,000 on one Redis, 500 in quorum mode over 3
// (Redlock is slower under contention: contenders split the votes and
// retry). No fault is injected: every section must succeed (in quorum
// mode a Lock may fail when a majority of nodes does not answer within the
// node timeout on this loaded machine; the worker then tries again), none
// may overlap another, fencing tokens (on one Redis) must increase in
// entry order, and the counter must equal the number of sections.
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
			nodes, store := make([][]string, workers), make([]string, workers)
			for i := range workers {
				nodes[i], store[i] = addrs, addrs[0]
			}
			recs := startFleet(t, workload("exclusion", nodes, store, tc.sections, 2*time.Second)).wait(t, 2*time.Minute)
			rep := analyse(recs)
			t.Logf("%s: %v", tc.name, rep)
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
			if got := counter(t, addrs[0]); got != tc.sections {
				t.Errorf("counter = %d, want %d: increments were lost", got, tc.sections)
			}
		})
	}
}
