package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// An unlock cut off by a stalled Redis hands the key to another waiter of
// the same Client when Redis resumes: a hand-off to the releasing Client's
// own waiter sends no message, the unlock's reply is gone. The waiter must
// still get the key within a claim window of Redis answering again.
func TestSelfHandOffAfterStalledUnlock(t *testing.T) {
	t.Parallel()
	for _, pause := range []time.Duration{1500 * time.Millisecond, 4 * time.Second} {
		t.Run(fmt.Sprint(pause), func(t *testing.T) {
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "self-stall-" + randKey()
			c := locktest.NewClient(t, srv.Client(t))
			_, unlock := locktest.MustLock(t, c, ctx, key, lock.WithLease(8*time.Second))
			// Two waiters of the same Client, then one of another.
			d2, r2 := lockAsync(c, ctx, key, lock.WithMaxWait(20*time.Second))
			waitQueued(t, rdb, key, 1)
			d3, r3 := lockAsync(c, ctx, key, lock.WithMaxWait(20*time.Second))
			waitQueued(t, rdb, key, 2)
			other := locktest.NewClient(t, srv.Client(t))
			d4, r4 := lockAsync(other, ctx, key, lock.WithMaxWait(20*time.Second))
			waitQueued(t, rdb, key, 3)
			waitSubscribed(t, rdb, key, 2)
			time.Sleep(50 * time.Millisecond)

			srv.Pause()
			resumed := false
			defer func() {
				if !resumed {
					srv.Resume()
				}
			}()
			start := time.Now()
			err := unlock()
			t.Logf("unlock on a stalled Redis: %v after %v", err, time.Since(start))
			time.Sleep(pause - time.Since(start))
			srv.Resume()
			resumed = true
			at := time.Now()
			for i, w := range []struct {
				d <-chan struct{}
				r *lockResult
			}{{d2, r2}, {d3, r3}, {d4, r4}} {
				locktest.Within(t, w.d, 15*time.Second, fmt.Sprint("waiter ", i+2))
				if w.r.err != nil {
					t.Fatalf("waiter %d: %v", i+2, w.r.err)
				}
				took := w.r.at.Sub(at)
				t.Logf("waiter %d got the key %v after Redis resumed", i+2, took)
				if took > time.Second+locktest.Bound(500*time.Millisecond) {
					t.Errorf("waiter %d got the key %v after Redis resumed, want within a claim window", i+2, took)
				}
				at = time.Now()
				if err := w.r.unlock(); err != nil {
					t.Errorf("unlock of waiter %d: %v", i+2, err)
				}
			}
		})
	}
}

// Many calls cut off by a stall longer than go-redis's read timeout (its
// pipelines, sent under the Client's background context, are retried);
// afterwards each key is obtainable within a claim window of Redis
// answering again.
func TestManyCutOffCallsAfterLongStall(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	c := locktest.NewClient(t, srv.Client(t))
	keys := []string{"cut-a-" + randKey(), "cut-b-" + randKey(), "cut-c-" + randKey()}
	_, unlockHeld := locktest.MustLock(t, c, context.Background(), keys[0])
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 40 * time.Millisecond) // spread over 2.4 s
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			start := time.Now()
			var err error
			if i%3 == 2 {
				_, _, err = c.TryLock(ctx, keys[i%3])
			} else {
				_, _, err = c.Lock(ctx, keys[i%3])
			}
			if d := time.Since(start); d > 150*time.Millisecond+locktest.Bound(100*time.Millisecond) {
				t.Errorf("call %d took %v with a 150 ms deadline (%v)", i, d, err)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := unlockHeld(); err == nil {
		t.Error("unlock on a stalled Redis reported success")
	}
	wg.Wait()
	time.Sleep(4500*time.Millisecond - 2500*time.Millisecond)
	srv.Resume()
	resumed = true
	at := time.Now()
	other := locktest.NewClient(t, srv.Client(t))
	for _, key := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		_, unlock, err := other.Lock(ctx, key)
		cancel()
		if err != nil {
			t.Fatalf("Lock %q after the stall: %v", key, err)
		}
		took := time.Since(at)
		t.Logf("%q obtained %v after Redis resumed", key, took)
		if took > time.Second+locktest.Bound(500*time.Millisecond) {
			t.Errorf("%q blocked %v after Redis resumed; want within one claim window", key, took)
		}
		_ = unlock()
	}
}
