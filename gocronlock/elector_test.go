package gocronlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// newElector returns a started Elector closed when the test ends.
func newElector(t testing.TB, l lock.Locker, name string) *gocronlock.Elector {
	t.Helper()
	e, err := gocronlock.NewElector(l, name, leader.WithBackoff(20*time.Millisecond, 200*time.Millisecond), leader.WithLogger(quiet))
	if err != nil {
		t.Fatalf("NewElector: %v", err)
	}
	if err := e.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// TestElectorFailover runs a job every 100 ms on three replicas' gocron
// schedulers with Electors: only the leader's runs it; when the leader's
// Elector closes, it resigns and one other replica runs the job from then
// on, within a second.
func TestElectorFailover(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	election, log := uniqueName(), &runLog{}
	var electors []*gocronlock.Elector
	for i := range 3 {
		e := newElector(t, locktest.NewClient(t, rdb), election)
		s := newScheduler(t, gocron.WithDistributedElector(e))
		if _, err := s.NewJob(gocron.DurationJob(100*time.Millisecond), gocron.NewTask(log.job(i, 10*time.Millisecond))); err != nil {
			t.Fatalf("NewJob: %v", err)
		}
		s.Start()
		electors = append(electors, e)
	}
	locktest.Eventually(t, 10*time.Second, "5 runs", func() bool { return len(log.sorted()) >= 5 })
	first := log.sorted()[0].replica
	leaders := 0
	for i, e := range electors {
		err := e.IsLeader(context.Background())
		if err == nil {
			leaders++
			if i != first {
				t.Errorf("replica %d leads, replica %d ran the job", i, first)
			}
			if _, ok := e.Token(); !ok {
				t.Errorf("the leader has no token")
			}
		} else if !errors.Is(err, gocronlock.ErrNotLeader) {
			t.Errorf("replica %d: IsLeader = %v, want nil or ErrNotLeader", i, err)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d replicas lead, want 1", leaders)
	}
	if err := electors[first].Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed := time.Now()
	if err := electors[first].IsLeader(context.Background()); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Errorf("closed leader: IsLeader = %v, want ErrNotLeader", err)
	}
	locktest.Eventually(t, 10*time.Second, "5 runs on another replica", func() bool {
		n := 0
		for _, r := range log.sorted() {
			if r.replica != first {
				n++
			}
		}
		return n >= 5
	})
	// The runs: the first leader's, then one other replica's, never mixed.
	runs := log.sorted()
	next, switched := -1, time.Time{}
	for _, r := range runs {
		switch {
		case r.replica == first && next < 0:
		case next < 0:
			next, switched = r.replica, r.start
		case r.replica != next:
			t.Fatalf("replica %d ran at %v after replica %d took over: runs %v", r.replica, r.start, next, runs)
		}
	}
	if d := switched.Sub(closed); d > time.Second {
		t.Errorf("replica %d ran first %v after the leader's Elector closed, want within 1 s", next, d)
	}
	t.Logf("leader %d -> %d, first run %v after Close", first, next, switched.Sub(closed).Round(time.Millisecond))
}

func TestElectorStartTwice(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	e := newElector(t, locktest.NewClient(t, rdb), uniqueName())
	if err := e.Start(); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("second Start = %v, want lock.ErrInvalid", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := gocronlock.NewElector(nil, "x"); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("NewElector(nil) = %v, want lock.ErrInvalid", err)
	}
}

// TestElectorFuncEndsOnLoss deletes the election's key while the leader
// runs a job through Func: the job's context ends with lock.ErrLost.
func TestElectorFuncEndsOnLoss(t *testing.T) {
	t.Parallel()
	r, rdb := locktest.NewRedis(t)
	election := uniqueName()
	e, err := gocronlock.NewElector(locktest.NewClient(t, rdb), election, leader.WithLease(300*time.Millisecond), leader.WithLogger(quiet))
	if err != nil {
		t.Fatalf("NewElector: %v", err)
	}
	if err := e.Func(func(context.Context) error { return nil })(context.Background()); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Fatalf("Func before Start = %v, want ErrNotLeader", err)
	}
	if err := e.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	s := newScheduler(t, gocron.WithDistributedElector(e))
	started, cause := make(chan struct{}, 1), make(chan error, 1)
	job := e.Func(func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil
	})
	if _, err := s.NewJob(gocron.DurationJob(100*time.Millisecond), gocron.NewTask(job), gocron.WithSingletonMode(gocron.LimitModeReschedule)); err != nil {
		t.Fatalf("NewJob: %v", err)
	}
	s.Start()
	locktest.Within(t, started, 10*time.Second, "a run on the leader")
	if !r.Del("lockkit:{" + leader.Key(election) + "}") {
		t.Fatal("no election key in Redis")
	}
	select {
	case err := <-cause:
		if !errors.Is(err, lock.ErrLost) {
			t.Errorf("the run's context ended with %v, want lock.ErrLost", err)
		}
	case <-time.After(locktest.Bound(2 * time.Second)):
		t.Fatal("the run's context did not end within 2 s of the loss")
	}
}
