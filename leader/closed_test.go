package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestCloseWhileLeadingEndsRun: closing the lock Client of a leader ends
// its lead context with cause lock.ErrClosed, and Run returns an error
// matching lock.ErrClosed at once instead of campaigning on a Client
// that can no longer lock; the replica waiting leads next.
func TestCloseWhileLeadingEndsRun(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	tr := newTracker()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		ran <- leader.Run(ctx, cs[0], "closed", tr.lead(t, 0, "closed", nil), leader.WithLease(5*time.Second))
	}()
	tr.next(t, locktest.Bound(2*time.Second))
	other := runAll(t, ctx, []lock.Locker{cs[1]}, "closed", func(int) func(context.Context) error {
		return tr.lead(t, 1, "closed", nil)
	})
	defer func() { cancel(); <-other }()
	time.Sleep(50 * time.Millisecond) // the other replica queues
	if err := cs[0].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ran:
		if !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Run after Close: %v, want lock.ErrClosed", err)
		}
	case <-time.After(locktest.Bound(time.Second)):
		t.Fatalf("Run goes on %v after its Client was closed", locktest.Bound(time.Second))
	}
	terms, _ := tr.snapshot()
	if !errors.Is(terms[0].cause, lock.ErrClosed) {
		t.Errorf("the lead context ended with cause %v, want lock.ErrClosed", terms[0].cause)
	}
	tr.next(t, locktest.Bound(2*time.Second)) // Close released the lock: the waiting replica leads
}

// TestRunOnAClosedClientReturnsAtOnce: Run on a Client closed before it
// campaigns returns lock.ErrClosed, not ctx's error after a back-off loop.
func TestRunOnAClosedClientReturnsAtOnce(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	_ = c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), locktest.Bound(time.Second))
	defer cancel()
	if err := leader.Run(ctx, c, "closed", func(context.Context) error { return nil }); !errors.Is(err, lock.ErrClosed) {
		t.Errorf("Run on a closed Client: %v, want lock.ErrClosed", err)
	}
}
