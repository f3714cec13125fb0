package lock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// SCRIPT FLUSH again and again while two Clients' goroutines contend on
// a few keys (their calls batched in pipelines): no call fails, mutual
// exclusion holds, and every goroutine makes progress.
func TestScriptFlushDuringBatches(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	clients := []*struct{ n atomic.Int64 }{{}, {}}
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	var inside [4]atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var errs atomic.Int64
	var perG [24]atomic.Int64
	for i := range 24 {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := i % 4
			key := fmt.Sprintf("flush-%d", k)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, unlock, err := c.Lock(ctx, key)
				cancel()
				if err != nil {
					errs.Add(1)
					t.Errorf("Lock: %v", err)
					return
				}
				if n := inside[k].Add(1); n != 1 {
					t.Errorf("%d holders of %s at once", n, key)
				}
				time.Sleep(200 * time.Microsecond)
				inside[k].Add(-1)
				if err := unlock(); err != nil {
					t.Errorf("unlock: %v", err)
					return
				}
				perG[i].Add(1)
				clients[i%2].n.Add(1)
			}
		}()
	}
	for range 60 {
		time.Sleep(25 * time.Millisecond)
		if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("acquisitions: %d + %d, errors %d", clients[0].n.Load(), clients[1].n.Load(), errs.Load())
	for i := range perG {
		if perG[i].Load() == 0 {
			t.Errorf("goroutine %d never got its key", i)
		}
	}
}
