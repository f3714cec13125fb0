package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestCloseWithLoneCallsOnFrozenRedis: Clients over a go-redis
// client with ContextTimeoutEnabled (read timeout 2 s) and a frozen
// network, each with a lone Lock in flight on the caller's goroutine
// (no deadline) and Locks queued behind it (10 s deadlines), and a held
// key. Every Close returns within 1 s; the queued Locks return ErrClosed
// by then; the lone ones ErrClosed when go-redis gives up, within the
// read timeout (docs/operations.md, "go-redis client settings").
func TestCloseWithLoneCallsOnFrozenRedis(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	proxy := locktest.StartProxy(t, srv.Addr)
	const readTimeout = 2 * time.Second
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, ReadTimeout: readTimeout, WriteTimeout: readTimeout})
	t.Cleanup(func() { _ = rdb.Close() })
	const clients, queued = 6, 3
	var cs []*lock.Client
	for i := range clients {
		c, err := lock.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		locktest.MustLock(t, c, context.Background(), fmt.Sprintf("held-%d-%s", i, randKey()))
	}
	proxy.Freeze()
	defer proxy.Thaw(0)
	type result struct {
		lone bool
		err  error
		at   time.Time
	}
	results := make(chan result, clients*(queued+1))
	var wg sync.WaitGroup
	for i, c := range cs {
		key := fmt.Sprintf("k-%d-%s", i, randKey())
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := c.Lock(context.Background(), key)
			results <- result{true, err, time.Now()}
		}()
		time.Sleep(20 * time.Millisecond) // the lone call is on its way first
		for range queued {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, _, err := c.Lock(ctx, key)
				results <- result{false, err, time.Now()}
			}()
		}
	}
	time.Sleep(200 * time.Millisecond)
	closeStart := time.Now()
	var cwg sync.WaitGroup
	took := make([]time.Duration, clients)
	for i, c := range cs {
		cwg.Add(1)
		go func() { defer cwg.Done(); took[i] = timed(func() { _ = c.Close() }) }()
	}
	cwg.Wait()
	closed := time.Now()
	for i, d := range took {
		if d > time.Second+locktest.Bound(slack) {
			t.Errorf("Close of Client %d took %v, want within 1 s", i, d)
		}
	}
	wg.Wait()
	close(results)
	for r := range results {
		if !errors.Is(r.err, lock.ErrClosed) {
			t.Errorf("Lock (lone %v) cut by Close = %v, want ErrClosed", r.lone, r.err)
		}
		bound := closed.Add(locktest.Bound(slack))
		if r.lone {
			bound = closeStart.Add(readTimeout + locktest.Bound(slack))
		}
		if r.at.After(bound) {
			t.Errorf("Lock (lone %v) returned %v past its bound", r.lone, r.at.Sub(bound))
		}
	}
}
