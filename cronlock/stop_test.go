package cronlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/lock"
)

// TestStopCancelsAfterGrace stops a Scheduler whose job runs until its
// context ends: the context ends with cause ErrStopped when the grace
// period has passed, and Stop's context is done once the run's locks are
// released.
func TestStopCancelsAfterGrace(t *testing.T) {
	t.Parallel()
	const grace = 200 * time.Millisecond
	rdb := newMini(t)
	r := newReplica(t, rdb, nil, cronlock.WithClock(newFakeClock(tick0).now), cronlock.WithStopGrace(grace))
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
	for _, key := range []string{runKey(name), tickKey(name)} {
		_, unlock, err := r.locker.TryLock(context.Background(), key)
		if err != nil {
			t.Fatalf("%s after Stop's context is done: %v, want free", key, err)
		}
		_ = unlock()
	}
}

// TestStopLetsRunsFinish stops a Scheduler during a short run: the run
// ends undisturbed, and Stop does not wait for the grace period.
func TestStopLetsRunsFinish(t *testing.T) {
	t.Parallel()
	r := newReplica(t, newMini(t), nil, cronlock.WithClock(newFakeClock(tick0).now))
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

// TestStopReleasesAtLeastFor stops a Scheduler that keeps a job's lock
// for most of its period: the lock is released when the grace period ends.
func TestStopReleasesAtLeastFor(t *testing.T) {
	t.Parallel()
	rdb := newMini(t)
	r := newReplica(t, rdb, nil, cronlock.WithClock(newFakeClock(tick0).now), cronlock.WithStopGrace(100*time.Millisecond))
	name := uniqueName()
	fire(r.c, r.add(t, name, nop, cronlock.AtLeastFor(900*time.Millisecond)))
	if _, _, err := r.locker.TryLock(context.Background(), runKey(name)); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock after the run = %v, want ErrNotObtained (AtLeastFor)", err)
	}
	select {
	case <-r.s.Stop().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Stop's context not done within 5 s")
	}
	_, unlock, err := r.locker.TryLock(context.Background(), runKey(name))
	if err != nil {
		t.Fatalf("run lock after Stop: %v, want free", err)
	}
	_ = unlock()
}

// TestStopped checks a stopped Scheduler: it adds no jobs, drops ticks and
// returns the same context from every Stop.
func TestStopped(t *testing.T) {
	t.Parallel()
	r := newReplica(t, newMini(t), nil, cronlock.WithClock(newFakeClock(tick0).now))
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
