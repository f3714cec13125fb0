package cronlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestStopCancelsAfterGrace stops a Scheduler whose job runs until its
// context ends: the context ends with cause ErrStopped when the grace
// period has passed, and Stop's context is done once the run's locks are
// released.
func TestStopCancelsAfterGrace(t *testing.T) {
	t.Parallel()
	const grace = 200 * time.Millisecond
	srv, rdb := locktest.NewRedis(t)
	r := newLocalReplica(t, rdb, nil, cronlock.WithClock(newFakeClock(tick0).now), cronlock.WithStopGrace(grace))
	name := uniqueName()
	started, cancelled := make(chan struct{}), make(chan error, 1)
	id := r.add(t, name, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return ctx.Err()
	})
	go fire(r.c, id)
	<-started
	outlive(t, srv, tickKey(name)) // its 949 ms lease could lapse before the check below
	stopped := time.Now()
	done := r.s.Stop()
	cause := <-cancelled
	if d := time.Since(stopped); d < grace-20*time.Millisecond || d > grace+time.Second {
		t.Fatalf("run cancelled %v after Stop, want after the %v grace", d, grace)
	}
	if cause != cronlock.ErrStopped {
		t.Fatalf("cause %v, want ErrStopped", cause)
	}
	select {
	case <-done.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Stop's context not done 5 s after the run ended")
	}
	if a := r.rec.only(t); a.Outcome != cronlock.OutcomeStopped || !errors.Is(a.Err, cronlock.ErrStopped) {
		t.Fatalf("attempt: %s, %v; want stopped (a deploy, not a failure), ErrStopped", a.Outcome, a.Err)
	}
	_, unlock, err := r.locker.TryLock(context.Background(), runKey(name))
	if err != nil {
		t.Fatalf("run lock after Stop's context is done: %v, want free", err)
	}
	_ = unlock()
	// The tick marker is kept until its fixed lease lapses, so that a late
	// replica cannot run the tick again.
	if _, _, err := r.locker.TryLock(context.Background(), tickKey(name)); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("tick marker right after Stop: %v, want still held", err)
	}
}

// TestStopLetsRunsFinish stops a Scheduler during a short run: the run
// ends undisturbed, and Stop does not wait for the grace period.
func TestStopLetsRunsFinish(t *testing.T) {
	t.Parallel()
	r := newLocalReplica(t, newRedis(t), nil, cronlock.WithClock(newFakeClock(tick0).now))
	started := make(chan struct{})
	var cause error
	id := r.add(t, uniqueName(), func(ctx context.Context) error {
		close(started)
		time.Sleep(100 * time.Millisecond)
		cause = context.Cause(ctx)
		return nil
	})
	go fire(r.c, id)
	<-started
	stopped := time.Now()
	select {
	case <-r.s.Stop().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Stop's context not done within 5 s; the grace period is 10 s")
	}
	// The run takes 100 ms, its tick marker is kept 875 ms after the tick.
	t.Logf("Stop done in %v", time.Since(stopped))
	if a := r.rec.only(t); a.Outcome != cronlock.OutcomeRan || cause != nil {
		t.Fatalf("attempt: %s, context cause %v; want ran, no cause", a.Outcome, cause)
	}
}

// Stop does not wait for a lock kept for AtLeastFor, and the lock ends
// at the end of the window, not a lease later: with the default 30 s
// lease, "@every 5s" and AtLeastFor(2s), Stop right after the run is done
// at once, the run lock stays taken until about 2 s after the run's
// start, and is free soon after, so that another replica runs the job's
// next tick.
func TestStopKeepsAtLeastForWindowOnly(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	r := newLocalReplica(t, rdb, nil, cronlock.WithClock(newFakeClock(tick0).now), cronlock.WithStopGrace(5*time.Second))
	other := locktest.NewClient(t, rdb)
	name := uniqueName()
	const window = 2 * time.Second
	var start time.Time
	fire(r.c, mustAdd(t, r.s, "@every 5s", name, func(context.Context) error {
		start = time.Now()
		return nil
	}, cronlock.AtLeastFor(window)))
	if a := r.rec.only(t); a.Outcome != cronlock.OutcomeRan {
		t.Fatalf("attempt %s (%v), want ran", a.Outcome, a.Err)
	}
	stopped := time.Now()
	select {
	case <-r.s.Stop().Done():
	case <-time.After(time.Second):
		t.Fatal("Stop's context not done within 1 s with no run in progress")
	}
	t.Logf("Stop done after %v", time.Since(stopped))
	// Taken until the window ends: TryLock is refused while well within it.
	for time.Since(start) < window-300*time.Millisecond {
		tried := time.Since(start)
		_, unlock, err := other.TryLock(context.Background(), runKey(name))
		if err == nil {
			_ = unlock()
			if tried < window-300*time.Millisecond {
				t.Fatalf("run lock free %v after the start, within the %v AtLeastFor window", tried, window)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	d := time.Since(start) + waitFree(t, other, runKey(name))
	t.Logf("run lock free %v after the start (AtLeastFor %v)", d, window)
	if d > window+time.Second {
		t.Errorf("run lock free %v after the start, want at the end of the %v window (within 1 s)", d, window)
	}
}

// TestStopped checks a stopped Scheduler: it adds no jobs, drops ticks and
// returns the same context from every Stop.
func TestStopped(t *testing.T) {
	t.Parallel()
	r := newLocalReplica(t, newRedis(t), nil, cronlock.WithClock(newFakeClock(tick0).now))
	id := r.add(t, uniqueName(), nop)
	done := r.s.Stop()
	if again := r.s.Stop(); again != done {
		t.Fatal("second Stop returned another context")
	}
	<-done.Done()
	if _, err := r.s.AddFunc("@every 1s", uniqueName(), nop); !errors.Is(err, cronlock.ErrStopped) {
		t.Fatalf("AddFunc after Stop = %v, want ErrStopped", err)
	}
	r.s.Start()
	fire(r.c, id)
	if all := r.rec.all(); len(all) != 0 {
		t.Fatalf("attempts after Stop: %v", all)
	}
}

// TestStopInvalid stops a Scheduler that New could not set up.
func TestStopInvalid(t *testing.T) {
	c := cron.New()
	s := cronlock.New(c, nil)
	s.Start()
	select {
	case <-s.Stop().Done():
	case <-time.After(time.Second):
		t.Fatal("Stop of an invalid Scheduler not done")
	}
	if _, err := s.AddFunc("@hourly", "job", nop); !errors.Is(err, cronlock.ErrInvalid) {
		t.Fatalf("AddFunc = %v, want ErrInvalid", err)
	}
}

// With Redis stalled (SIGSTOP) while a job runs, Stop's context is done
// within the grace period plus 1 s: the release of the run lock is bounded
// by the Locker, and the pending marker release is dropped.
func TestStopWithinGraceWhenRedisStalls(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	const grace = 300 * time.Millisecond
	r := newLocalReplica(t, rdb, nil, cronlock.WithClock(newFakeClock(tick0).now), cronlock.WithStopGrace(grace))
	started := make(chan struct{})
	id := r.add(t, uniqueName(), func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	go fire(r.c, id)
	<-started
	srv.Pause()
	t.Cleanup(srv.Resume)
	stopped := time.Now()
	select {
	case <-r.s.Stop().Done():
	case <-time.After(grace + 3*time.Second):
		t.Fatal("Stop's context not done 3 s past the grace period on a stalled Redis")
	}
	took := time.Since(stopped)
	t.Logf("Stop done %v after Stop on a stalled Redis (grace %v)", took, grace)
	if took > grace+time.Second+200*time.Millisecond {
		t.Errorf("Stop took %v, want within the %v grace + 1 s", took, grace)
	}
	if a := r.rec.only(t); a.Outcome != cronlock.OutcomeStopped {
		t.Errorf("attempt %s (%v), want stopped", a.Outcome, a.Err)
	}
}

// A replica alone with Redis stalled (SIGSTOP) for 2.5 s: the ticks it
// could not take are reported failed when their lateness bound passes,
// never skipped-tick-done (no other replica ran them), and ticks run again
// once Redis answers.
func TestStalledRedisNeverReportsTickDone(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	r := newReplica(t, rdb, nil)
	r.add(t, uniqueName(), nop)
	r.s.Start()
	r.rec.waitFor(t, cronlock.OutcomeRan, 3*time.Second)
	srv.Pause()
	time.Sleep(2500 * time.Millisecond)
	srv.Resume()
	resumed := len(r.rec.all())
	r.rec.waitRanSince(t, resumed, 5*time.Second, "a run after Redis resumed")
	waitStopped(t, r.s)
	for _, a := range r.rec.all() {
		t.Logf("tick %s: %s %v", a.Tick.Format("15:04:05.000"), a.Outcome, a.Err)
	}
	if n := r.rec.count(cronlock.OutcomeSkippedTickDone); n != 0 {
		t.Errorf("%d ticks reported skipped-tick-done with no other replica", n)
	}
	if n := r.rec.count(cronlock.OutcomeFailed); n < 1 {
		t.Errorf("no tick reported failed during a 2.5 s stall")
	}
	for _, a := range r.rec.all() {
		if a.Outcome == cronlock.OutcomeFailed && !errors.Is(a.Err, context.DeadlineExceeded) {
			t.Errorf("tick %v failed with %v, want an error saying Redis did not answer in time", a.Tick, a.Err)
		}
	}
}

// Two replicas of an "@every 2s" job with AtLeastFor(1s) and the default
// 30 s lease: the one that ran a tick is stopped within its window. The
// other runs the job again at one of the next two ticks, not a lease
// later (every tick skipped-held for 30 s).
func TestStopDuringAtLeastForFreesJobForFleet(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	reps := []*replica{newReplica(t, rdb, nil), newReplica(t, rdb, nil)}
	name := uniqueName()
	for _, r := range reps {
		mustAdd(t, r.s, "@every 2s", name, nop, cronlock.AtLeastFor(time.Second))
		r.s.Start()
	}
	ran := -1
	deadline := time.Now().Add(6 * time.Second)
	for ran < 0 && time.Now().Before(deadline) {
		for i, r := range reps {
			if r.rec.count(cronlock.OutcomeRan) > 0 {
				ran = i
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ran < 0 {
		t.Fatal("no replica ran the job within 6 s")
	}
	stopped := time.Now()
	waitStopped(t, reps[ran].s)
	other := reps[1-ran]
	before := len(other.rec.all())
	other.rec.wait(t, 5*time.Second, "a run on the other replica after Stop", func(as []cronlock.Attempt) bool {
		for _, a := range as[before:] {
			if a.Outcome == cronlock.OutcomeRan {
				t.Logf("other replica ran tick %s, %v after Stop", a.Tick.Format("15:04:05"), time.Since(stopped).Round(time.Millisecond))
				return true
			}
		}
		return false
	})
}
