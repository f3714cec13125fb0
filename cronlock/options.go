package cronlock

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lockkit/lockkit/lock"
)

const (
	// DefaultSkewTolerance is how far apart replicas' clocks may be, by
	// default, for each tick to run at most once (see [WithSkewTolerance]).
	DefaultSkewTolerance = 500 * time.Millisecond

	// DefaultStopGrace is how long [Scheduler.Stop] lets running jobs
	// finish, by default, before it cancels their contexts.
	DefaultStopGrace = 10 * time.Second
)

// Option configures a [Scheduler]; pass options to [New].
type Option func(*config)

type config struct {
	tolerance time.Duration
	grace     time.Duration
	clock     func() time.Time
	shifted   bool // clock was set with WithClock
	logger    *slog.Logger
	onAttempt func(Attempt)
}

// WithSkewTolerance sets how far apart the replicas' clocks may be: with
// clocks within d of each other no tick runs twice, however late a
// replica's cron fires. A replica keeps a tick's marker for hold =
// min(4d, 7/8 period) after the tick, where period is the time to the
// next tick, and skips a tick when it fires, or gets the tick's marker
// from Redis, more than hold - d after it by its own clock
// ([OutcomeSkippedLate]). [Scheduler.Stop] may wait up to hold for the
// last tick's marker.
//
// Default [DefaultSkewTolerance] (500 ms): a job every second may fire
// 375 ms late, a job every 2 s or slower 1 s or more. d must be positive
// and, for [Scheduler.AddFunc] to accept a job, below 7/8 of its period.
func WithSkewTolerance(d time.Duration) Option {
	return func(c *config) { c.tolerance = d }
}

// WithStopGrace sets how long [Scheduler.Stop] lets running jobs finish
// before it cancels their contexts with cause [ErrStopped]. Default [DefaultStopGrace] (10 s); 0
// cancels at once; it must not be negative.
func WithStopGrace(d time.Duration) Option {
	return func(c *config) { c.grace = d }
}

// WithClock sets the wall clock by which the Scheduler's entries fire and
// by which it tells which tick a run is for. Default [time.Now]. It exists
// for tests: a clock shifted by 400 ms makes the Scheduler behave like a
// replica whose system clock is 400 ms off. It must not be nil.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.clock, c.shifted = now, true }
}

// WithLogger sets the logger that gets one record per run attempt (see
// [Outcome] for the levels) and one per failed release. Default
// [slog.Default]. It must not be nil; use slog.New(slog.DiscardHandler)
// for no logging.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithOnAttempt makes the Scheduler call f with every run attempt's
// [Attempt], after the attempt ended. f is called on the attempt's
// goroutine, possibly for several attempts at once: it must be safe for
// concurrent use and return quickly. Default (and with a nil f): no
// callback.
func WithOnAttempt(f func(Attempt)) Option {
	return func(c *config) { c.onAttempt = f }
}

func newConfig(opts []Option) (config, error) {
	cfg := config{
		tolerance: DefaultSkewTolerance,
		grace:     DefaultStopGrace,
		clock:     time.Now,
		logger:    slog.Default(),
	}
	for _, o := range opts {
		if o == nil {
			return cfg, invalidf("nil Option")
		}
		o(&cfg)
	}
	switch {
	case cfg.tolerance <= 0:
		return cfg, invalidf("skew tolerance %v must be positive", cfg.tolerance)
	case cfg.grace < 0:
		return cfg, invalidf("stop grace %v must not be negative", cfg.grace)
	case cfg.clock == nil:
		return cfg, invalidf("nil clock")
	case cfg.logger == nil:
		return cfg, invalidf("nil logger")
	}
	return cfg, nil
}

// JobOption configures one job; pass job options to [Scheduler.AddFunc]
// or [Scheduler.AddJob].
type JobOption func(*jobConfig)

type jobConfig struct {
	atMost, atLeast       time.Duration
	atMostSet, atLeastSet bool
}

// AtMostFor bounds every run of the job to d. The run lock is taken with a
// fixed lease of d and no watchdog, so Redis drops it d after it was taken
// whatever happens to this process: a hung or crashed runner frees the job
// within d. The run's context is cancelled with cause [ErrAtMostFor] a
// drift allowance (2% + 5 ms) before d, so that the job hears of it before
// the lease can end. A job that ignores its context past d no longer holds
// the lock and may overlap the next run.
//
// d must be at least [lock.MinLease]. Default: no limit; the run lock's
// lease is then the Locker's default, renewed by its watchdog for as long
// as the run lasts.
func AtMostFor(d time.Duration) JobOption {
	return func(j *jobConfig) { j.atMost, j.atMostSet = d, true }
}

// AtLeastFor keeps the run lock for d after a run started, also when the
// run ended sooner, so that no replica starts the job again within d. The
// lock is released at the run's end when it took longer, and never later
// than 9/10 of the [AtMostFor] limit after the start, so that it is
// released before its fixed lease can lapse. The kept lock ends when its
// window does, also after [Scheduler.Stop], which does not wait for it:
// Stop sets its lease to what is left of the window (a closed Locker
// releases it at once).
//
// d must be positive, not longer than AtMostFor's and shorter than the
// job's period (the time between two ticks): [Scheduler.AddFunc] refuses
// a longer one with [ErrInvalid], since it would skip every other tick on
// every replica. Default: the lock is released when the run ends.
func AtLeastFor(d time.Duration) JobOption {
	return func(j *jobConfig) { j.atLeast, j.atLeastSet = d, true }
}

func newJobConfig(opts []JobOption) (jobConfig, error) {
	var j jobConfig
	for _, o := range opts {
		if o == nil {
			return j, errors.New("nil JobOption")
		}
		o(&j)
	}
	switch {
	case j.atMostSet && j.atMost <= 0:
		return j, fmt.Errorf("AtMostFor %v must be positive", j.atMost)
	case j.atMostSet && j.atMost < lock.MinLease:
		return j, fmt.Errorf("AtMostFor %v is shorter than the minimum lease %v", j.atMost, lock.MinLease)
	case j.atLeastSet && j.atLeast <= 0:
		return j, fmt.Errorf("AtLeastFor %v must be positive", j.atLeast)
	case j.atLeastSet && j.atMostSet && j.atLeast > j.atMost:
		return j, fmt.Errorf("AtLeastFor %v is longer than AtMostFor %v", j.atLeast, j.atMost)
	}
	return j, nil
}

// budget is how long after its start a run's context lasts under
// AtMostFor: d less the drift allowance, so that the context ends before
// the lock's fixed lease can.
func (j jobConfig) budget() time.Duration {
	return j.atMost - j.atMost/50 - 5*time.Millisecond
}

// lockOptions are the options of the run lock.
func (j jobConfig) lockOptions() []lock.LockOption {
	if j.atMostSet {
		return []lock.LockOption{lock.WithFixedLease(j.atMost)}
	}
	return nil
}

// keepFor is how long after its start a run's lock is kept at least.
func (j jobConfig) keepFor() time.Duration {
	switch {
	case !j.atLeastSet:
		return 0
	case j.atMostSet:
		return min(j.atLeast, j.atMost-j.atMost/10)
	}
	return j.atLeast
}
