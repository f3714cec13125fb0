package lock_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lockkit/lockkit/lock"
)

// TestMutualExclusion runs 50 goroutines × 200 critical sections on one key
// through three Clients with their own connection pools. Each section does
// a non-atomic GET/SET increment; a lost increment or two goroutines inside
// at once fails the test.
func TestMutualExclusion(t *testing.T) {
	srv, _ := newReal(t)
	const workers, rounds = 50, 200
	var clients []*lock.Client
	for range 3 {
		clients = append(clients, newClient(t, srv.Client(t)))
	}
	rdb := srv.Client(t)
	ctx := context.Background()

	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		c := clients[w%len(clients)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				lctx, unlock, err := c.Lock(ctx, "counter")
				if err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				if n > maxInside.Load() {
					maxInside.Store(n)
				}
				v, _ := rdb.Get(lctx, "counter:value").Int()
				err = rdb.Set(lctx, "counter:value", strconv.Itoa(v+1), 0).Err()
				inside.Add(-1)
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
	got, err := rdb.Get(ctx, "counter:value").Int()
	if err != nil || got != workers*rounds {
		t.Fatalf("counter = %d (%v), want %d", got, err, workers*rounds)
	}
	if m := maxInside.Load(); m != 1 {
		t.Fatalf("%d goroutines were inside at once", m)
	}
}
