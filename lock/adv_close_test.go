package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Adversarial review of 2026-11-28: Close takes its waiters out of the
// Redis queue before it returns, also when Redis stalls through part of
// Close.

// TestCloseLeavesQueueAfterShortStall (guarantee 7: "Its waiting Lock
// calls have left the Redis queue when it returns"): 10 waiters of the
// closing Client are queued behind another Client's hold; Redis freezes
// just before Close and resumes 500 ms into it. Close returns within 1 s
// and, since Redis answered in time, none of its waiters is left in the
// queue.
func TestCloseLeavesQueueAfterShortStall(t *testing.T) {
	srv, admin := newReal(t)
	holder := locktest.NewClient(t, srv.Client(t))
	crdb := srv.Client(t)
	c, err := lock.New(crdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "adv-close-stall-" + randKey()
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(time.Minute))
	defer unlock()
	const n = 10
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.Lock(ctx, key); !errors.Is(err, lock.ErrClosed) {
				t.Errorf("waiter = %v, want ErrClosed", err)
			}
		}()
	}
	waitQueued(t, admin, key, n)
	srv.Pause()
	resumed := time.AfterFunc(500*time.Millisecond, srv.Resume)
	defer resumed.Stop()
	took := timed(func() { _ = c.Close() })
	if took > time.Second {
		t.Errorf("Close took %v", took)
	}
	srv.Resume()
	left := admin.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()
	if len(left) > 0 {
		t.Errorf("Close returned after %v with %d of its %d waiters still in the Redis queue (Redis answered again 500 ms into Close)", took, len(left), n)
	}
	wg.Wait()
}
