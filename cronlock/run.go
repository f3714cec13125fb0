package cronlock

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/lock"
)

// entry is the cron.Job the Scheduler adds for a job: each Run is one run
// attempt.
type entry struct {
	s       *Scheduler
	id      cron.EntryID
	name    string
	job     Job
	cfg     jobConfig
	spec    string
	ticks   cron.Schedule // by the Scheduler's clock
	runKey  string        // run lock: held while the job runs
	tickKey string        // tick marker: held for a while after each tick

	marker *marker // shared by the entries of one name: Update and re-adding keep it
}

// Run makes one run attempt and reports its outcome. cron calls it at
// every tick.
func (e *entry) Run() {
	if !e.s.begin() {
		return
	}
	defer e.s.wg.Done()
	e.s.report(e.attempt())
}

// attempt takes the tick, then the job, runs it and releases the job.
//
// The tick marker is one lock key per job, taken with TryLock for each
// tick and released hold after the tick, so that replicas that fire
// within hold find the tick taken (see tickAt); a key per tick would cost
// a fencing counter per tick in Redis. The run lock keeps runs from
// overlapping.
func (e *entry) attempt() Attempt {
	s := e.s
	known := s.timeKnown() // before now: the offset is stored first
	now := s.now()
	e.letGoOfMarker(now)
	if !known {
		// Its tick by its own clock may be another replica's next or
		// last one: it runs none rather than one that may run elsewhere.
		return Attempt{Job: e.name, Outcome: OutcomeFailed, Err: ErrClockUnknown}
	}
	tick, hold, ok := tickAt(e.ticks, now, s.cfg.tolerance)
	a := Attempt{Job: e.name, Tick: tick, Outcome: OutcomeSkippedLate}
	late := tick.Add(hold - s.cfg.tolerance)
	if !ok || now.After(late) {
		return a
	}
	unlockTick, a, ok := e.takeMarker(a, hold, late)
	if !ok {
		return a
	}
	e.holdMarker(tick.Add(hold), unlockTick)
	if s.now().After(late) { // Redis answered late: the tick may have run
		return a
	}

	return e.run(a, max(late.Sub(s.now()), minBound))
}

// run takes the job's run lock within bound, runs the job and releases
// the lock (or keeps it for AtLeastFor).
func (e *entry) run(a Attempt, bound time.Duration) Attempt {
	s := e.s
	start := time.Now()
	held, unlockRun, err := s.locker.TryLock(s.life, e.runKey, named(e.name, append(e.cfg.lockOptions(), lock.WithMaxWait(bound))...)...)
	if err != nil && context.Cause(s.life) == ErrStopped {
		a.Outcome, a.Err = OutcomeStopped, errors.Join(ErrStopped, err)
		return a
	}
	if err != nil {
		return a.notObtained(err, OutcomeSkippedHeld)
	}
	a.Token, _ = lock.FencingToken(held, e.runKey)
	ctx, done := e.runContext(held, a.Tick, start)
	err = call(ctx, e.job)
	a.Duration = time.Since(start)
	switch lost := context.Cause(held); {
	case errors.Is(context.Cause(ctx), ErrAtMostFor):
		a.Outcome, a.Err = OutcomeFailed, explain(ctx, err)
	case errors.Is(lost, ErrStopped):
		a.Outcome, a.Err = OutcomeStopped, explain(held, err)
	case errors.Is(lost, lock.ErrLost), errors.Is(lost, lock.ErrClosed):
		a.Outcome, a.Err = OutcomeLost, explain(held, err)
	case err != nil:
		a.Outcome, a.Err = OutcomeFailed, explain(ctx, err)
	default:
		a.Outcome = OutcomeRan
	}
	done()
	e.keep(start.Add(e.cfg.keepFor()), unlockRun)
	return a
}

// otherSpec tells, from err, another replica's refusal of the tick
// marker (asked for at sent), whether the marker was taken for a tick that
// is not one of this replica's spec: then this tick runs nowhere. It also
// returns that tick, as far as it can tell (the marker's end less the
// lease of this tick's marker).
//
// A marker taken for tick c ends markerLease(hold(c)) after c, later by
// however long the holder's command took to reach Redis (at most the
// lateness bound, hold(c)); what is left of it was read after sent, and
// clocks agree within the skew tolerance. So the marker is one of this
// spec's ticks when, for some own tick c, its end less c's lease lies in
// [-(time since sent) - tolerance, hold(c) + minBound]. This also covers
// a replica whose clock is ahead and meets its own previous tick's marker.
func (e *entry) otherSpec(err error, hold time.Duration, sent time.Time) (time.Time, bool) {
	var ne *lock.NotObtainedError
	if !errors.As(err, &ne) || ne.Reserved || ne.RemainingLease <= 0 {
		return time.Time{}, false
	}
	tol := e.s.cfg.tolerance
	end := sent.Add(ne.RemainingLease)
	early := e.s.now().Sub(sent) + tol
	longest := markerLease(4 * tol) // no hold is longer than 4 × tolerance
	for c := e.ticks.Next(end.Add(-longest - early - time.Nanosecond)); !c.IsZero() && !c.After(end.Add(minBound)); c = e.ticks.Next(c) {
		_, h, ok := tickAt(e.ticks, c, tol)
		if !ok {
			continue
		}
		if off := end.Sub(c.Add(markerLease(h))); off >= -early && off <= h+minBound {
			return time.Time{}, false
		}
	}
	return end.Add(-markerLease(hold)), true
}

// runContext returns the job's context and the function to call when the
// job returned. The context carries the run lock's ownership, but has a
// cancellation of its own so that it ends with one cause decided by time,
// not by which timer's goroutine runs first: [ErrAtMostFor] from the limit
// on, since the fixed lease of AtMostFor ends right after it; before, the
// cause of the run lock's context.
func (e *entry) runContext(held context.Context, tick, start time.Time) (context.Context, func()) {
	base := context.WithValue(context.WithoutCancel(held), runKey{}, run{key: e.runKey, tick: tick, noTick: tick.IsZero()})
	ctx, cancel := context.WithCancelCause(base)
	limit := start.Add(e.cfg.budget())
	stop := context.AfterFunc(held, func() {
		cause := context.Cause(held)
		if e.cfg.atMostSet && !time.Now().Before(limit) {
			cause = ErrAtMostFor
		}
		cancel(cause)
	})
	if !e.cfg.atMostSet {
		return ctx, func() { stop(); cancel(nil) }
	}
	ctx, cancelLimit := context.WithDeadlineCause(ctx, limit, ErrAtMostFor)
	return ctx, func() { stop(); cancelLimit(); cancel(nil) }
}

// minBound is the least time an attempt gives Redis to answer, even right
// at the lateness bound: what an answer then says is checked against the
// bound again.
const minBound = 50 * time.Millisecond

// errNoAnswer is the error of an attempt Redis did not answer in time.
var errNoAnswer = fmt.Errorf("cronlock: Redis did not answer before the tick's lateness bound: %w", context.DeadlineExceeded)

// notObtained sets the outcome of a TryLock that failed with err: skipped
// when another owner holds the key, failed otherwise (a Redis error, or no
// answer before the tick's lateness bound).
func (a Attempt) notObtained(err error, skipped Outcome) Attempt {
	switch {
	case errors.Is(err, lock.ErrNotObtained) && errors.Is(err, context.DeadlineExceeded):
		// Redis did not answer before the tick's lateness bound: a Redis
		// failure, and the tick may have run nowhere.
		a.Outcome, a.Err = OutcomeFailed, errNoAnswer
	case errors.Is(err, lock.ErrNotObtained) && !errors.Is(err, context.Canceled):
		a.Outcome = skipped
	default:
		a.Outcome, a.Err = OutcomeFailed, err
	}
	return a
}

// call runs job, turning a panic into an error.
func call(ctx context.Context, job Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanicked, r, debug.Stack())
		}
	}()
	return job.Run(ctx)
}

// explain returns err with the cause of ctx, when ctx ended and err does
// not already say so.
func explain(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	switch {
	case cause == nil:
		return err
	case err == nil:
		return cause
	case errors.Is(err, cause):
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// releaseAfter calls unlock, a tick marker's, once: after d, or when the
// returned function is called, whichever comes first; at once when d is
// not positive. At Stop a pending release is dropped rather than waited
// for: the marker's fixed lease lapses by itself, so Stop is not delayed
// and a late replica cannot run the tick again.
func (s *Scheduler) releaseAfter(d time.Duration, key string, unlock lock.UnlockFunc) func() {
	var once sync.Once
	release := func() { once.Do(func() { s.logRelease(key, unlock()) }) }
	if d <= 0 {
		release()
		return release
	}
	s.timers.Add(1)
	go func() {
		defer s.timers.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			release()
		case <-s.life.Done():
		}
	}()
	return release
}
