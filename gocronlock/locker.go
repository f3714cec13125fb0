package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockkit/lockkit/lock"
)

// A Locker is a [gocron.Locker] that runs each scheduled run of a job
// once across replicas (see the package documentation). Create it with
// [NewLocker] and give it to gocron with gocron.WithDistributedLocker or
// gocron.WithDistributedJobLocker. It is safe for concurrent use.
type Locker struct {
	locker lock.Locker
	cfg    config
	sched  atomic.Pointer[schedulerRef] // set by DeriveHolds

	mu   sync.Mutex
	runs map[context.Context]*run // runs under way, by the job context gocron passed to Lock
}

var _ gocron.Locker = (*Locker)(nil)

// inspector is a Locker that reads a lock's state without taking it, as
// [lock.Client] does.
type inspector interface {
	Inspect(ctx context.Context, key string) (lock.LockInfo, error)
}

// NewLocker returns a Locker that takes its locks with locker (one
// [lock.Client] per process). It returns an error matching
// [lock.ErrInvalid] for a nil locker (or a nil pointer in it) or a bad
// option.
func NewLocker(locker lock.Locker, opts ...Option) (*Locker, error) {
	if isNil(locker) {
		return nil, fmt.Errorf("%w: gocronlock: nil locker", lock.ErrInvalid)
	}
	cfg := newConfig(opts)
	if err := errors.Join(cfg.bad...); err != nil {
		return nil, err
	}
	return &Locker{locker: locker, cfg: cfg, runs: make(map[context.Context]*run)}, nil
}

// isNil reports whether locker is nil or holds a nil pointer, such as a
// nil *lock.Client, whose methods would panic in gocron's goroutines.
func isNil(locker lock.Locker) bool {
	if locker == nil {
		return true
	}
	v := reflect.ValueOf(locker)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func (l *Locker) runKey(job string) string  { return l.cfg.prefix + ":run:" + job }
func (l *Locker) tickKey(job string) string { return l.cfg.prefix + ":tick:" + job }

// named returns opts with the telemetry name of job's locks, when job
// makes a valid one.
func named(job string, opts ...lock.LockOption) []lock.LockOption {
	if name := "gocronlock:" + job; len(name) <= lock.MaxNameLen && utf8.ValidString(name) {
		opts = append(opts, lock.WithName(name))
	}
	return opts
}

// Lock is called by gocron when a run of job key is due. In this order it
// takes the job's run lock (watchdog lease, held until the run ends),
// then its tick marker (held for the minimum hold from the time it is
// taken, whenever the run ends), and returns the run's lock. It returns
// [ErrHeld] when an earlier tick's run still holds the run lock,
// [ErrTickDone] when another replica took the marker less than the
// minimum hold ago (it holds or held the run lock for this tick), or the
// error of a Redis call that failed; gocron then skips the run. It
// returns by ctx's deadline (plus 100 ms) and the lock budget
// ([WithLockBudget]) from its call, with an error matching
// [context.DeadlineExceeded] when they passed. Every attempt is reported
// (see [Outcome]).
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	start := time.Now()
	a := Attempt{Job: key}
	var err error
	if a.MinHold, err = l.minHold(ctx, key); err != nil {
		a.Outcome, a.Err = failure(ctx), err
		l.report(a)
		return nil, err
	}
	deadline, limited := ctx.Deadline()
	if b := start.Add(l.cfg.budget); l.cfg.budget > 0 && (!limited || b.Before(deadline)) {
		deadline, limited = b, true
	}
	var runOpts []lock.LockOption
	if limited {
		runOpts = append(runOpts, lock.WithMaxWait(max(time.Until(deadline), time.Nanosecond)))
	}
	if l.cfg.lease > 0 {
		runOpts = append(runOpts, lock.WithLease(l.cfg.lease))
	}
	lctx, unlock, err := l.locker.TryLock(ctx, l.runKey(key), named(key, runOpts...)...)
	if err != nil {
		return nil, l.refused(ctx, a, err)
	}
	// The marker outlives a short run, and its lease a crash: it tells
	// replicas that fire later for this tick that it was taken. It is
	// taken only by a run lock's holder, so a held marker means the tick
	// was run.
	unlockMarker, err := l.takeMarker(ctx, key, a.MinHold, deadline, limited)
	if err != nil {
		if limited || ctx.Err() != nil {
			// Redis may be stalled: release within the deadline's
			// grace, or at once on Shutdown, rather than after a
			// release timeout of its own.
			go l.release(key, unlock)
		} else {
			l.release(key, unlock)
		}
		a.Outcome, a.Err = failure(ctx), err
		if errors.Is(err, lock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			a.Outcome, a.Err = OutcomeSkippedTickDone, ErrTickDone
		}
		l.report(a)
		return nil, a.Err
	}
	// Released when the minimum hold has passed, before its lease ends,
	// so that lock observers see a release rather than a loss.
	time.AfterFunc(a.MinHold, func() { l.release(key, unlockMarker) })
	a.Token, _ = lock.FencingToken(lctx, l.runKey(key))
	r := &run{l: l, jobCtx: ctx, ctx: lctx, unlock: unlock, start: time.Now(), a: a}
	l.mu.Lock()
	l.runs[ctx] = r
	l.mu.Unlock()
	return r, nil
}

// takeMarker takes job key's tick marker for hold, by deadline when
// limited. Holding it does not end with ctx (WithHoldUntilUnlock), nor
// does taking it at once: a run that gocron stops as it takes the marker
// still takes it, unless Redis keeps it waiting for stopGrace more (a
// stalled Redis must not hold up Shutdown).
func (l *Locker) takeMarker(ctx context.Context, key string, hold time.Duration, deadline time.Time, limited bool) (lock.UnlockFunc, error) {
	opts := []lock.LockOption{lock.WithFixedLease(markerLease(hold)), lock.WithHoldUntilUnlock(), lock.Integration{}.Internal()}
	if limited {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, context.DeadlineExceeded
		}
		opts = append(opts, lock.WithMaxWait(left))
	}
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(stopGrace, cancel) })
	defer stop()
	_, unlock, err := l.locker.TryLock(mctx, l.tickKey(key), named(key, opts...)...)
	return unlock, err
}

// stopGrace is how long taking a marker goes on after gocron's job
// context ended.
const stopGrace = 100 * time.Millisecond

// refused reports and returns the error of an attempt whose run lock was
// not taken with err. A held run lock is this tick's when the marker is
// held too (its holder took both, as Inspect reads, within the lock
// budget if one is set), an earlier tick's otherwise.
func (l *Locker) refused(ctx context.Context, a Attempt, err error) error {
	a.Outcome, a.Err = failure(ctx), err
	if errors.Is(err, lock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		a.Outcome, a.Err = OutcomeSkippedHeld, ErrHeld
		if in, ok := l.locker.(inspector); ok {
			ictx, cancel := ctx, context.CancelFunc(func() {})
			if l.cfg.budget > 0 {
				ictx, cancel = context.WithTimeout(ctx, l.cfg.budget)
			}
			info, ierr := in.Inspect(ictx, l.tickKey(a.Job))
			cancel()
			if ierr == nil && info.Held {
				a.Outcome, a.Err = OutcomeSkippedTickDone, ErrTickDone
			}
		}
	}
	l.report(a)
	return a.Err
}

// failure is the outcome of an attempt that Lock could not complete:
// stopped when gocron ended the job's context, failed otherwise.
func failure(ctx context.Context) Outcome {
	if errors.Is(ctx.Err(), context.Canceled) {
		return OutcomeStopped
	}
	return OutcomeFailed
}

// release releases a lock this Locker took, logging a failure other than
// a lease that already ended.
func (l *Locker) release(key string, unlock lock.UnlockFunc) {
	if err := unlock(); err != nil && !errors.Is(err, lock.ErrLost) && !errors.Is(err, lock.ErrClosed) {
		l.cfg.logger.Warn("gocronlock: release failed; the lease will lapse", "job", key, "error", err)
	}
}

// markerLease is the fixed lease of a marker kept for hold: longer, so
// that the replica releases it before the lease can end (by an eighth and
// 50 ms, for a busy machine's late timer), and so that a crashed
// replica's lapses soon after.
func markerLease(hold time.Duration) time.Duration {
	return hold + hold/8 + 50*time.Millisecond
}

// run is one run of a job on this replica: the [gocron.Lock] Lock returns.
type run struct {
	l      *Locker
	jobCtx context.Context // the job context gocron passed to Lock
	ctx    context.Context // the run lock's context
	unlock lock.UnlockFunc
	start  time.Time
	once   sync.Once

	mu sync.Mutex
	a  Attempt // Err: the job's error, set by Func
}

// Unlock releases the run lock, not the marker, and reports the run: lost
// when the run lock's context ended with [lock.ErrLost] or
// [lock.ErrClosed], failed when the job, run through [Locker.Func],
// returned an error, ran otherwise. Later calls do nothing. It returns
// the release's error.
func (r *run) Unlock(context.Context) error {
	err := lock.ErrNotHeld
	r.once.Do(func() {
		r.l.mu.Lock()
		if r.l.runs[r.jobCtx] == r {
			delete(r.l.runs, r.jobCtx)
		}
		r.l.mu.Unlock()
		cause := context.Cause(r.ctx)
		err = r.unlock()
		r.mu.Lock()
		a := r.a
		r.mu.Unlock()
		a.Duration = time.Since(r.start)
		switch {
		case r.ctx.Err() != nil && (errors.Is(cause, lock.ErrLost) || errors.Is(cause, lock.ErrClosed)):
			a.Outcome, a.Err = OutcomeLost, cause
		case errors.Is(err, lock.ErrLost) || errors.Is(err, lock.ErrClosed):
			a.Outcome, a.Err = OutcomeLost, err
		case a.Err != nil:
			a.Outcome = OutcomeFailed
		default:
			a.Outcome = OutcomeRan
		}
		r.l.report(a)
	})
	return err
}

// Func wraps a job function for gocron.NewTask: fn runs with the run
// lock's context, which ends when gocron's job context ends or the run
// lock is lost (cause [lock.ErrLost]), and its error is the run's
// [OutcomeFailed]. The job must be locked with this Locker; otherwise the
// function returns [ErrNoRun] without running fn.
func (l *Locker) Func(fn func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		l.mu.Lock()
		r := l.runs[ctx]
		l.mu.Unlock()
		if r == nil {
			return ErrNoRun
		}
		err := fn(r.ctx)
		r.mu.Lock()
		r.a.Err = err
		r.mu.Unlock()
		return err
	}
}

// Task is gocron.NewTask(l.Func(fn)).
func (l *Locker) Task(fn func(ctx context.Context) error) gocron.Task {
	return gocron.NewTask(l.Func(fn))
}
