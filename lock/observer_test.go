package lock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu       sync.Mutex
	acquires []lock.Acquire
	waiting  []lock.Acquire
	releases []lock.Release
	renewals []lock.Renewal
}

func (r *recorder) Background(ctx context.Context) context.Context { return ctx }

func (r *recorder) AcquireStarted(ctx context.Context, a lock.Acquire) context.Context { return ctx }

func (r *recorder) AcquireWaiting(ctx context.Context, a lock.Acquire) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = append(r.waiting, a)
}

func (r *recorder) AcquireEnded(ctx context.Context, a lock.Acquire, held context.Context) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquires = append(r.acquires, a)
	return held
}

func (r *recorder) Released(ctx context.Context, rel lock.Release) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releases = append(r.releases, rel)
}

func (r *recorder) Renewed(rn lock.Renewal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewals = append(r.renewals, rn)
}

func (r *recorder) counts() (acquires, releases, renewals int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acquires), len(r.releases), len(r.renewals)
}

func TestObserverSeesEveryOutcome(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	rec := &recorder{}
	c := locktest.NewClient(t, rdb, lock.WithObserver(rec))
	ctx := context.Background()

	outer, unlockOuter := locktest.MustLock(t, c, ctx, "k") // acquired
	_, unlockInner := locktest.MustLock(t, c, outer, "k")   // acquired, reentrant
	_, _, _ = c.TryLock(ctx, "k")                           // busy
	// timeout: the limit passes while waiting for the held key, after Redis
	// answered the first attempt (a limit passing during a Redis call is
	// an error: Redis did not answer in time).
	_, _, _ = c.Lock(ctx, "k", lock.WithMaxWait(200*time.Millisecond))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _, _ = c.Lock(cctx, "k") // canceled
	_, _, _ = c.Lock(ctx, "")   // error
	_ = unlockInner()
	_ = unlockOuter()
	lost, _ := locktest.MustLock(t, c, ctx, "gone", lock.WithFixedLease(50*time.Millisecond))
	mr.FastForward(time.Second) // the key expires in Redis...
	<-lost.Done()               // ...and the validity ends locally

	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []struct {
		outcome   lock.Outcome
		reentrant bool
	}{
		{lock.OutcomeAcquired, false}, {lock.OutcomeAcquired, true}, {lock.OutcomeBusy, false},
		{lock.OutcomeTimeout, false}, {lock.OutcomeCanceled, false}, {lock.OutcomeError, false},
		{lock.OutcomeAcquired, false},
	}
	if len(rec.acquires) != len(want) {
		t.Fatalf("%d acquire events, want %d: %+v", len(rec.acquires), len(want), rec.acquires)
	}
	for i, w := range want {
		a := rec.acquires[i]
		if a.Outcome != w.outcome || a.Reentrant != w.reentrant || (a.Err == nil) != (w.outcome == lock.OutcomeAcquired) {
			t.Errorf("acquire %d: %v reentrant=%v err=%v; want %v reentrant=%v", i, a.Outcome, a.Reentrant, a.Err, w.outcome, w.reentrant)
		}
		if w.outcome == lock.OutcomeAcquired && a.Token == 0 {
			t.Errorf("acquire %d: no fencing token", i)
		}
	}
	if len(rec.releases) != 3 {
		t.Fatalf("%d release events, want 3: %+v", len(rec.releases), rec.releases)
	}
	inner, outerRel, lostRel := rec.releases[0], rec.releases[1], rec.releases[2]
	if !inner.Reentrant || inner.Cause != nil || outerRel.Reentrant || outerRel.Cause != nil {
		t.Errorf("unlock events %+v %+v", inner, outerRel)
	}
	if lostRel.Key != "gone" || lostRel.Cause != lock.ErrLost {
		t.Errorf("loss event %+v, want cause ErrLost", lostRel)
	}
}
