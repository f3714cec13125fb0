package leader_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
)

// TestRunReturnsByDeadlineWithRedisStalled: with Redis SIGSTOPped, Run
// returns its context's error within the deadline + 100 ms: on the
// leader (whose resignation Redis does not answer), on the replica
// waiting for the lock, and on one that started campaigning once Redis
// was stalled.
func TestRunReturnsByDeadlineWithRedisStalled(t *testing.T) {
	locktest.Timed(t)
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	slack := locktest.Bound(100 * time.Millisecond)
	deadline := time.Now().Add(locktest.Bound(500 * time.Millisecond))
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	tr := newTracker()
	type ret struct {
		err error
		at  time.Time
	}
	rets := make(chan ret, 3)
	for i, c := range cs {
		go func() {
			err := leader.Run(ctx, c, "deadline", tr.lead(t, i, "deadline", nil), leader.WithLease(10*time.Second))
			rets <- ret{err, time.Now()}
		}()
	}
	tr.next(t, time.Until(deadline))
	time.Sleep(50 * time.Millisecond) // the other replica queues
	r.Pause()
	defer r.Resume()
	if time.Now().After(deadline) {
		t.Fatal("Redis stalled after the deadline: the machine is too slow for this test")
	}
	late := replicas(t, r, 1)[0] // campaigns on a Redis stalled already
	go func() {
		err := leader.Run(ctx, late, "deadline", tr.lead(t, 2, "deadline", nil), leader.WithLease(10*time.Second))
		rets <- ret{err, time.Now()}
	}()
	for range 3 {
		rt := <-rets
		if rt.err != context.DeadlineExceeded {
			t.Errorf("Run: %v, want context.DeadlineExceeded", rt.err)
		}
		if late := rt.at.Sub(deadline); late > slack {
			t.Errorf("Run returned %v after its deadline, want within %v", late, slack)
		} else {
			t.Logf("Run returned %v after its deadline", late)
		}
	}
}

// TestRunReturnsAfterCancelWithRedisStalled: a Run cancelled (no
// deadline) while it leads with Redis stalled waits for its resignation
// 1 s at most, as lock.UnlockFunc does, then returns.
func TestRunReturnsAfterCancelWithRedisStalled(t *testing.T) {
	locktest.Timed(t)
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := newTracker()
	ran := make(chan error, 1)
	go func() {
		ran <- leader.Run(ctx, c, "cancel", tr.lead(t, 0, "cancel", nil), leader.WithLease(10*time.Second))
	}()
	tr.next(t, locktest.Bound(2*time.Second))
	r.Pause()
	defer r.Resume()
	start := time.Now()
	cancel()
	limit := time.Second + locktest.Bound(100*time.Millisecond)
	select {
	case err := <-ran:
		if err != context.Canceled {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
		t.Logf("Run returned %v after its context was cancelled", time.Since(start))
	case <-time.After(limit):
		t.Fatalf("Run goes on %v after its context was cancelled with Redis stalled", limit)
	}
}
