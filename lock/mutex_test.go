package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// hammer runs workers goroutines of rounds critical sections each; worker
// w locks through lockers[w%len(lockers)], its round r on key
// keys[(w+r)%len(keys)]. A section does a non-atomic GET/SET increment of
// the key's counter in data. The test fails on any error, on two holders of
// a key at once, and on a lost increment.
func hammer(t *testing.T, lockers []lock.Locker, data redis.Cmdable, keys []string, workers, rounds int, opts ...lock.LockOption) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	inside := map[string]int{}
	want := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		for r := range rounds {
			want[keys[(w+r)%len(keys)]]++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				key := keys[(w+r)%len(keys)]
				lctx, unlock, err := lockers[w%len(lockers)].Lock(ctx, key, opts...)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				inside[key]++
				n := inside[key]
				mu.Unlock()
				if n > 1 {
					errs <- fmt.Errorf("%d holders of %q at once", n, key)
					return
				}
				v, _ := data.Get(lctx, key+":n").Int()
				err = data.Set(lctx, key+":n", v+1, 0).Err()
				mu.Lock()
				inside[key]--
				mu.Unlock()
				if err == nil {
					err = unlock()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for key, n := range want {
		if got, err := data.Get(ctx, key+":n").Int(); err != nil || got != n {
			t.Fatalf("counter of %q = %d (%v), want %d", key, got, err, n)
		}
	}
}

// TestMutualExclusion runs 50 goroutines × 200 critical sections on one key
// through three Clients with their own connection pools.
func TestMutualExclusion(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv, rdb := newReal(t)
	var lockers []lock.Locker
	for range 3 {
		lockers = append(lockers, locktest.NewClient(t, srv.Client(t)))
	}
	hammer(t, lockers, rdb, []string{"counter"}, 50, 200)
}

// TestClusterMutualExclusion does the same on a 3-master Redis Cluster,
// with keys spread over every master.
func TestClusterMutualExclusion(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	cl := redistest.StartCluster(t, 3)
	data := cl.Client(t)
	var lockers []lock.Locker
	for range 3 {
		lockers = append(lockers, locktest.NewClient(t, cl.Client(t)))
	}
	hammer(t, lockers, data, spreadKeys(t, data, 3, 2), 12, 50)
}

// TestQuorumMutualExclusion does the same in quorum mode over 3 masters.
func TestQuorumMutualExclusion(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srvs, clients := quorumOf(t, 3)
	var lockers []lock.Locker
	for range 3 {
		lockers = append(lockers, newQuorum(t, clients()))
	}
	hammer(t, lockers, srvs[0].Client(t), []string{"qm"}, 9, 40, lock.WithMaxWait(30*time.Second))
}
