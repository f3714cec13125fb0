package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestExclusionWithInlineAndQueuedCalls: one Client over a
// go-redis client with ContextTimeoutEnabled, so that its lone calls go
// inline and the others queue, with 16 workers on one key and on eight,
// with a pool of one connection and of the default size, while other
// goroutines of the same Client keep cutting off Locks of the same keys
// with 1-4 ms deadlines (acquisitions Redis may run after their caller
// left, for the janitor to clean up). Never two holders of a key at
// once, no increment of a shared counter lost, fencing tokens of a key
// strictly increasing in the order its holders got it, and every worker
// gets through its rounds (hand-offs still reach waiters).
func TestExclusionWithInlineAndQueuedCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		keys int
		pool int
	}{{"one key, pool 1", 1, 1}, {"one key", 1, 0}, {"eight keys, pool 1", 8, 1}, {"eight keys", 8, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, data := newReal(t)
			rdb := inlineClient(t, srv, redis.Options{PoolSize: tc.pool})
			c := locktest.NewClient(t, rdb)
			var keys []string
			for range tc.keys {
				keys = append(keys, "ex-"+randKey())
			}
			stop := make(chan struct{})
			var noise sync.WaitGroup
			for i := range 4 {
				noise.Add(1)
				go func() {
					defer noise.Done()
					for r := 0; ; r++ {
						select {
						case <-stop:
							return
						default:
						}
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rand.N(4))*time.Millisecond)
						_, unlock, err := c.Lock(ctx, keys[(i+r)%len(keys)])
						cancel()
						if err == nil {
							_ = unlock()
						}
					}
				}()
			}
			const workers, rounds = 16, 60
			var mu sync.Mutex
			inside := map[string]int{}
			last := map[string]uint64{}
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range rounds {
						key := keys[(w+r)%len(keys)]
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						lctx, unlock, err := c.Lock(ctx, key)
						if err != nil {
							cancel()
							errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
							return
						}
						token, _ := lock.FencingToken(lctx, key)
						mu.Lock()
						inside[key]++
						n := inside[key]
						prev := last[key]
						last[key] = token
						mu.Unlock()
						if n > 1 {
							errs <- fmt.Errorf("%d holders of %q at once", n, key)
						}
						if token <= prev {
							errs <- fmt.Errorf("token %d of %q after %d", token, key, prev)
						}
						v, _ := data.Get(lctx, key+":n").Int()
						err = data.Set(lctx, key+":n", v+1, 0).Err()
						mu.Lock()
						inside[key]--
						mu.Unlock()
						if uerr := unlock(); err == nil {
							err = uerr
						}
						cancel()
						if err != nil {
							errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			noise.Wait()
			close(errs)
			var all []error
			for err := range errs {
				all = append(all, err)
			}
			if len(all) > 0 {
				t.Fatalf("%d errors, first: %v", len(all), errors.Join(all[:min(len(all), 3)]...))
			}
			total := 0
			for _, key := range keys {
				n, _ := data.Get(context.Background(), key+":n").Int()
				total += n
			}
			if total != workers*rounds {
				t.Errorf("counters sum to %d, want %d: an increment was lost", total, workers*rounds)
			}
		})
	}
}
