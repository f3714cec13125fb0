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

// The Observer sees every outcome: acquisitions, waits, losses with their
// reason.

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

// TestObserverLossReason: a lease found gone in Redis and one whose
// validity ran out without a confirmed renewal are told apart.
func TestObserverLossReason(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	rec := &recorder{}
	c := locktest.NewClient(t, rdb, lock.WithObserver(rec))
	ctx := context.Background()

	// Gone: the key is deleted; the next renewal (every 100 ms) finds out.
	gone, _ := locktest.MustLock(t, c, ctx, "gone", lock.WithLease(300*time.Millisecond))
	mr.FlushAll()
	<-gone.Done()
	// Not renewed: a fixed lease is never renewed; its validity runs out.
	lapsed, _ := locktest.MustLock(t, c, ctx, "lapsed", lock.WithFixedLease(100*time.Millisecond))
	<-lapsed.Done()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := map[string]lock.Loss{"gone": lock.LossKeyGone, "lapsed": lock.LossNotRenewed}
	for _, r := range rec.releases {
		if r.Cause != lock.ErrLost || r.Loss != want[r.Key] {
			t.Errorf("release of %q: cause %v loss %v, want ErrLost %v", r.Key, r.Cause, r.Loss, want[r.Key])
		}
		delete(want, r.Key)
	}
	if len(want) != 0 {
		t.Errorf("no release of %v", want)
	}
	if s := lock.LossNotRenewed.String(); s != "not_renewed" {
		t.Errorf("LossNotRenewed.String() = %q", s)
	}
}

// TestObserverWaiting: a Lock that finds the key held is reported waiting
// with its place in the queue before it ends; a TryLock and a Lock that
// gets the key at once are not.
func TestObserverWaiting(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	rec := &recorder{}
	c := locktest.NewClient(t, rdb, lock.WithObserver(rec))
	ctx := context.Background()

	_, unlock := locktest.MustLock(t, c, ctx, "k")
	_, _, _ = c.TryLock(ctx, "k")
	results := make(chan error, 2)
	for i := range 2 {
		go func() {
			lctx, unlockW, err := c.Lock(ctx, "k", lock.WithMaxWait(5*time.Second))
			if err == nil {
				<-lctx.Done() // held until the test ends it
				_ = unlockW()
			}
			results <- err
		}()
		locktest.Eventually(t, 5*time.Second, "waiting event", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.waiting) == i+1 })
	}
	rec.mu.Lock()
	for i, w := range rec.waiting {
		if !w.Waited || w.Position != i+1 || w.Key != "k" {
			t.Errorf("waiting event %d: %+v, want Waited, Position %d", i, w, i+1)
		}
	}
	rec.mu.Unlock()
	_ = unlock() // the first waiter gets the key...
	locktest.Eventually(t, 5*time.Second, "hand-over", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.acquires) == 3 })
	if err := c.Close(); err != nil { // ...and the second ErrClosed
		t.Fatal(err)
	}
	for range 2 {
		<-results
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.acquires) != 4 {
		t.Fatalf("%d acquire events, want 4", len(rec.acquires))
	}
	first, try, served, closed := rec.acquires[0], rec.acquires[1], rec.acquires[2], rec.acquires[3]
	if first.Waited || try.Waited || first.Position != 0 || try.Position != 0 {
		t.Errorf("calls that did not wait: %+v %+v", first, try)
	}
	if !served.Waited || served.Position != 1 || served.Outcome != lock.OutcomeAcquired {
		t.Errorf("served waiter: %+v, want acquired after waiting at 1", served)
	}
	if !closed.Waited || closed.Position != 2 || closed.Outcome != lock.OutcomeCanceled || !errors.Is(closed.Err, lock.ErrClosed) {
		t.Errorf("waiter ended by Close: %+v, want canceled (a graceful Close is no failure) with ErrClosed after waiting at 2", closed)
	}
}
