package gocronlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// pauseBefore is a lock.Locker that pauses Redis before its TryLock of a
// key containing part, once.
type pauseBefore struct {
	*lock.Client
	r    *locktest.Redis
	part string

	mu     sync.Mutex
	paused bool
}

func (p *pauseBefore) TryLock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	if strings.Contains(key, p.part) {
		p.mu.Lock()
		if !p.paused {
			p.paused = true
			p.r.Pause()
		}
		p.mu.Unlock()
	}
	return p.Client.TryLock(ctx, key, opts...)
}

// TestLockReturnsByDeadlineWhileRedisStalls calls Lock with a 300 ms
// deadline while Redis is stopped, before the run lock and between the
// run lock and the marker: Lock returns within the deadline + 100 ms,
// fails the attempt, and a later Lock, once Redis is back, runs.
func TestLockReturnsByDeadlineWhileRedisStalls(t *testing.T) {
	locktest.Timed(t)
	for _, part := range []string{":run:", ":tick:"} {
		t.Run(strings.Trim(part, ":"), func(t *testing.T) {
			r, rdb := locktest.NewRedis(t)
			name, rec := uniqueName(), &recorder{}
			p := &pauseBefore{Client: locktest.NewClient(t, rdb), r: r, part: part}
			l := newLocker(t, p, rec, gocronlock.WithMinHold(200*time.Millisecond))
			const deadline = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			lk, err := l.Lock(ctx, name)
			took := time.Since(start)
			r.Resume()
			if err == nil {
				_ = lk.Unlock(ctx)
				t.Fatalf("Lock with Redis stopped succeeded")
			}
			t.Logf("Lock returned after %v", took.Round(time.Millisecond))
			if limit := locktest.Bound(deadline + 100*time.Millisecond); took > limit {
				t.Errorf("Lock took %v with Redis stopped, want within %v (deadline + 100 ms)", took, limit)
			}
			if all := rec.all(); len(all) != 1 || all[0].Outcome != gocronlock.OutcomeFailed {
				t.Errorf("attempts %v, want one failed", all)
			}
			// The attempt's locks, taken late by Redis, are released:
			// the next attempt runs, within a lease (30 s) and more.
			locktest.Eventually(t, locktest.Bound(2*time.Second), "a run after Redis is back", func() bool {
				lk, err := l.Lock(context.Background(), name)
				if err != nil {
					return false
				}
				return lk.Unlock(context.Background()) == nil
			})
		})
	}
}

// TestOnceEveryRunWhileRedisStalls runs a job every 2 s on two replicas
// whose clocks are 300 ms apart, with a minimum hold of 800 ms and a lock
// budget of 200 ms, and stops Redis for 1.3 s (longer than the marker's
// lease) right after the first replica ran a tick, while the second
// fires for it: no tick runs on both replicas. The second's attempt
// fails (a tick missed); it does not run a tick the first one ran.
func TestOnceEveryRunWhileRedisStalls(t *testing.T) {
	t.Parallel()
	r, rdb := locktest.NewRedis(t)
	name := uniqueName()
	const (
		interval = 2 * time.Second
		skew     = 300 * time.Millisecond
	)
	type won struct {
		replica int
		tick    time.Time
	}
	var (
		mu     sync.Mutex
		runs   []won
		paused bool
	)
	stalled := make(chan struct{})
	var scheds []gocron.Scheduler
	for i, off := range []time.Duration{skew, 0} { // replica 0 fires first
		var l *gocronlock.Locker
		onAttempt := func(a gocronlock.Attempt) {
			if i != 0 || a.Outcome != gocronlock.OutcomeRan {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !paused { // the run lock is released: stop Redis now
				paused = true
				r.Pause()
				close(stalled)
			}
		}
		l = newLocker(t, locktest.NewClient(t, rdb), nil, gocronlock.WithMinHold(800*time.Millisecond), gocronlock.WithLockBudget(200*time.Millisecond), gocronlock.WithOnAttempt(onAttempt))
		clock := offsetClock{clockwork.NewRealClock(), off}
		locker := tickLocker{Locker: l, lock: func(at time.Time) {
			mu.Lock()
			runs = append(runs, won{i, at.Truncate(interval)})
			mu.Unlock()
		}, now: clock.Now}
		s := newScheduler(t, gocron.WithClock(clock), gocron.WithDistributedLocker(locker))
		if _, err := s.NewJob(gocron.CronJob("*/2 * * * * *", true), l.Task(func(context.Context) error { return nil }),
			gocron.WithName(name)); err != nil {
			t.Fatalf("NewJob: %v", err)
		}
		scheds = append(scheds, s)
	}
	for _, s := range scheds {
		s.Start()
	}
	locktest.Within(t, stalled, 10*time.Second, "a run on replica 0")
	time.Sleep(1300 * time.Millisecond) // the stall: longer than the marker's lease
	r.Resume()
	// Two more ticks after the stall.
	time.Sleep(2 * interval)
	for _, s := range scheds {
		_ = s.Shutdown()
	}
	mu.Lock()
	defer mu.Unlock()
	by := map[time.Time][]int{}
	for _, w := range runs {
		by[w.tick] = append(by[w.tick], w.replica)
	}
	for tick, replicas := range by {
		if len(replicas) > 1 {
			t.Errorf("tick %v ran on replicas %v, want once", tick.Format("15:04:05.000"), replicas)
		}
	}
	t.Logf("runs: %v", runs)
}

// tickLocker is a gocron.Locker that reports, when its Locker's Lock
// succeeds, the time by the replica's clock when gocron called it: the
// tick it fired for.
type tickLocker struct {
	gocron.Locker
	lock func(fired time.Time)
	now  func() time.Time
}

func (k tickLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	fired := k.now()
	lk, err := k.Locker.Lock(ctx, key)
	if err == nil {
		k.lock(fired)
	}
	return lk, err
}

// TestLostWhileRedisStallsPastLease stops Redis for longer than the run
// lock's 300 ms lease while the job runs: the Task's context ends with
// lock.ErrLost within the lease, and the attempt is reported lost, not
// ran.
func TestLostWhileRedisStallsPastLease(t *testing.T) {
	t.Parallel()
	r, rdb := locktest.NewRedis(t)
	name, rec := uniqueName(), &recorder{}
	l := newLocker(t, locktest.NewClient(t, rdb), rec, gocronlock.WithLease(300*time.Millisecond))
	s := newScheduler(t, gocron.WithDistributedLocker(l))
	started, cause := make(chan struct{}, 1), make(chan error, 1)
	job := func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil
	}
	if _, err := s.NewJob(gocron.DurationJob(time.Hour), l.Task(job), gocron.WithName(name),
		gocron.WithStartAt(gocron.WithStartImmediately())); err != nil {
		t.Fatalf("NewJob: %v", err)
	}
	s.Start()
	locktest.Within(t, started, 10*time.Second, "a run")
	r.Pause()
	paused := time.Now()
	select {
	case err := <-cause:
		if !errors.Is(err, lock.ErrLost) {
			t.Errorf("the run's context ended with %v, want lock.ErrLost", err)
		}
		if d := time.Since(paused); d > locktest.Bound(300*time.Millisecond) {
			t.Errorf("the run's context ended %v after Redis stopped, want within the 300 ms lease", d)
		}
	case <-time.After(locktest.Bound(2 * time.Second)):
		t.Error("the run's context did not end with Redis stopped past the lease")
	}
	time.Sleep(500 * time.Millisecond) // past the lease in Redis too
	r.Resume()
	_ = s.Shutdown()
	if all := rec.all(); len(all) != 1 || all[0].Outcome != gocronlock.OutcomeLost || !errors.Is(all[0].Err, lock.ErrLost) {
		t.Errorf("attempts %v, want one lost with lock.ErrLost", all)
	}
}

// TestShutdownWhileRedisStallsBetweenLocks stops Redis after a run's
// run lock, before its marker, and shuts the scheduler down: Shutdown
// returns nil well within gocron's stop timeout (3 s), and the attempt
// is reported stopped, not ran.
func TestShutdownWhileRedisStallsBetweenLocks(t *testing.T) {
	t.Parallel()
	r, rdb := locktest.NewRedis(t)
	name, rec := uniqueName(), &recorder{}
	p := &pauseBefore{Client: locktest.NewClient(t, rdb), r: r, part: ":tick:"}
	l := newLocker(t, p, rec)
	s := newScheduler(t, gocron.WithDistributedLocker(l), gocron.WithStopTimeout(3*time.Second))
	ran := make(chan struct{}, 1)
	if _, err := s.NewJob(gocron.DurationJob(time.Hour), l.Task(func(context.Context) error { ran <- struct{}{}; return nil }),
		gocron.WithName(name), gocron.WithStartAt(gocron.WithStartImmediately())); err != nil {
		t.Fatalf("NewJob: %v", err)
	}
	s.Start()
	defer r.Resume()
	locktest.Eventually(t, 10*time.Second, "Redis stopped before the marker", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.paused
	})
	start := time.Now()
	err := s.Shutdown()
	took := time.Since(start)
	t.Logf("Shutdown after %v: %v", took.Round(time.Millisecond), err)
	if err != nil || took > locktest.Bound(time.Second)/4 {
		t.Errorf("Shutdown = %v after %v with Redis stopped between the locks, want nil within %v", err, took, locktest.Bound(time.Second)/4)
	}
	r.Resume()
	select {
	case <-ran:
		t.Errorf("the job ran after Shutdown")
	default:
	}
	if all := rec.all(); len(all) != 1 || all[0].Outcome != gocronlock.OutcomeStopped {
		t.Errorf("attempts %v, want one stopped", all)
	}
}
