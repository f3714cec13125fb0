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

// TestObserveReportsTheTermAfterTheLeadersClientCloses: when the
// leader's Client closes (its Run returns lock.ErrClosed), Observe on a
// third Client reports the next replica's term, with its label and
// token, within 1 s (scaled); the closed leader's term was reported
// before.
func TestObserveReportsTheTermAfterTheLeadersClientCloses(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	cs := replicas(t, r, 3)
	octx, stop := context.WithCancel(context.Background())
	defer stop()
	o := observeAll(octx, cs[2], "close")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := newTracker()
	closedRun := make(chan error, 1)
	go func() { closedRun <- leader.Run(ctx, cs[0], "close", tr.lead(t, 0, "close", nil)) }()
	tr.next(t, locktest.Bound(2*time.Second))
	other := runAll(t, ctx, []lock.Locker{cs[1]}, "close", func(int) func(context.Context) error { return tr.lead(t, 1, "close", nil) })
	terms, _ := tr.snapshot()
	sawToken := func(tok uint64, label string) {
		t.Helper()
		var info leader.Info
		ok := locktest.ClosedWithin(waitFor(func() bool {
			info = o.get()[tok]
			return info.Led
		}), locktest.Bound(time.Second))
		if !ok || info.Leader.Label != label {
			t.Errorf("term %d of %s: observed %v %+v", tok, label, ok, info)
		}
	}
	sawToken(terms[0].token, "r0")
	_ = cs[0].Close()
	select {
	case err := <-closedRun:
		if !errors.Is(err, lock.ErrClosed) {
			t.Errorf("the closed leader's Run: %v, want lock.ErrClosed", err)
		}
	case <-time.After(locktest.Bound(2 * time.Second)):
		t.Fatal("the closed leader's Run goes on")
	}
	if who := tr.next(t, locktest.Bound(2*time.Second)); who != 1 {
		t.Fatalf("replica %d leads, want 1", who)
	}
	terms, most := tr.snapshot()
	sawToken(terms[1].token, "r1")
	cancel()
	locktest.Within(t, other, locktest.Bound(2*time.Second), "replica 1's Run returned")
	stop()
	o.wait()
	checkTerms(t, terms, most)
}
