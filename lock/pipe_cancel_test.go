package lock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// Many goroutines of two Clients call Lock and TryLock with deadlines of
// 0-15 ms, so contexts end while their requests are queued, taken by a
// sender, in a pipeline, or answered (requests are reused). Mutual
// exclusion holds, no call overruns its deadline by 100 ms, and afterwards
// every key is obtainable at once (nothing left behind blocks it longer
// than a claim window).
func TestCancelRacesWithSenders(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	const nkeys = 3
	var inside [nkeys]atomic.Int32
	var got atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for i := range 32 {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for time.Now().Before(stop) {
				k := r.IntN(nkeys)
				key := fmt.Sprintf("cancel-%d", k)
				d := time.Duration(r.IntN(15000)) * time.Microsecond
				ctx, cancel := context.WithTimeout(context.Background(), d)
				start := time.Now()
				var err error
				var unlock func() error
				if r.IntN(2) == 0 {
					_, unlock, err = c.TryLock(ctx, key)
				} else {
					_, unlock, err = c.Lock(ctx, key)
				}
				if took := time.Since(start); took > d+locktest.Bound(100*time.Millisecond) {
					t.Errorf("call took %v with a %v deadline", took, d)
				}
				cancel()
				if err != nil {
					continue
				}
				if n := inside[k].Add(1); n != 1 {
					t.Errorf("%d holders of %s", n, key)
				}
				got.Add(1)
				time.Sleep(100 * time.Microsecond)
				inside[k].Add(-1)
				_ = unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acquisitions", got.Load())
	done := time.Now()
	other := locktest.NewClient(t, srv.Client(t))
	for k := range nkeys {
		key := fmt.Sprintf("cancel-%d", k)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, unlock, err := other.Lock(ctx, key)
		cancel()
		if err != nil {
			t.Fatalf("Lock %s afterwards: %v", key, err)
		}
		t.Logf("%s obtained %v after the calls ended", key, time.Since(done))
		if d := time.Since(done); d > time.Second+locktest.Bound(500*time.Millisecond) {
			t.Errorf("%s blocked %v after the calls ended", key, d)
		}
		_ = unlock()
	}
}
