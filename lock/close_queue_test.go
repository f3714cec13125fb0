package lock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Close takes the Client's queued waiters out of the Redis queue before it
// returns: a release right after Close hands the key to the live waiter of
// another Client at once, not to a waiter of the closed Client (which no
// one would confirm, so the live one would wait a claim window). The
// closed Client's Redis client is closed right after, as a program that
// shuts down does: nothing of Close's may be left to do then.
func TestCloseLeavesQueueBeforeReturning(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	const n = 25
	for round := range 5 {
		key := "close-queue-" + randKey()
		b := locktest.NewClient(t, rdb)
		c := locktest.NewClient(t, rdb)
		ardb := srv.Client(t)
		a, err := lock.New(ardb)
		if err != nil {
			t.Fatal(err)
		}
		_, unlockB := locktest.MustLock(t, b, ctx, key)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := a.Lock(ctx, key); !errors.Is(err, lock.ErrClosed) {
					t.Errorf("A's waiter = %v, want ErrClosed", err)
				}
			}()
		}
		waitQueued(t, rdb, key, n)
		cDone, cRes := lockAsync(c, ctx, key)
		waitQueued(t, rdb, key, n+1)
		queue := rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()
		live := queue[n:] // C's waiter

		start := time.Now()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > locktest.Bound(time.Second) {
			t.Errorf("Close took %v", d)
		}
		_ = ardb.Close()
		left := rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()
		if !slices.Equal(left, live) {
			t.Errorf("round %d: right after Close the queue holds %d owners, want only the other Client's waiter (%d of the closed Client's still queued)", round, len(left), len(left)-1)
		}
		released := time.Now()
		if err := unlockB(); err != nil {
			t.Fatal(err)
		}
		locktest.Within(t, cDone, 2*time.Second, "C's Lock")
		if cRes.err != nil {
			t.Fatalf("C's Lock = %v", cRes.err)
		}
		// One claim window (1 s) is what a hand-off to a closed Client's
		// waiter costs; a direct hand-off takes milliseconds.
		if d := cRes.at.Sub(released); d > locktest.Bound(300*time.Millisecond) {
			t.Errorf("round %d: C obtained the key %v after B's release, want at once", round, d)
		}
		_ = cRes.unlock()
		wg.Wait()
	}
}
