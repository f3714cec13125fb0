package gocronlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockkit/lockkit/lock"
)

// DefaultMinHold is the minimum hold of a job whose schedule the Locker
// does not know (see [Locker.DeriveHolds]) when [WithMinHold] is not set.
const DefaultMinHold = 500 * time.Millisecond

// MaxMinHold is the longest minimum hold [WithMinHold] accepts: a
// marker's lease, an eighth and 50 ms longer, must fit a time.Duration.
const MaxMinHold = 200 * 365 * 24 * time.Hour

// DefaultKeyPrefix is the default of [WithKeyPrefix].
const DefaultKeyPrefix = "gocronlock"

// An Option configures a [Locker].
type Option func(*config)

type config struct {
	lease     time.Duration // run lock's watchdog lease; 0: the Locker's default
	budget    time.Duration // WithLockBudget; 0: none
	minHold   time.Duration // 0: derived or DefaultMinHold
	prefix    string
	onAttempt func(Attempt)
	logger    gocron.Logger
	bad       []error
}

// WithLease sets the lease of the run lock, renewed by the watchdog while
// the job runs: a crashed replica frees the job within it. Default: the
// lock Client's default lease (30 s unless [lock.WithDefaultLease]). At
// least [lock.MinLease].
func WithLease(d time.Duration) Option {
	return func(c *config) {
		if d < lock.MinLease {
			c.bad = append(c.bad, fmt.Errorf("%w: gocronlock: lease %v below %v", lock.ErrInvalid, d, lock.MinLease))
			return
		}
		c.lease = d
	}
}

// WithMinHold sets the minimum hold of every job: how long, by Redis's
// clock, the tick marker a run takes keeps other replicas from running
// the job again. It must exceed how far apart the replicas fire for one
// tick (clock skew plus firing delays) and stay below the job's interval
// less that. Default: half the job's shortest interval when the Locker
// knows the scheduler ([Locker.DeriveHolds]), else [DefaultMinHold]. At
// least [lock.MinLease], at most [MaxMinHold].
func WithMinHold(d time.Duration) Option {
	return func(c *config) {
		switch {
		case d < lock.MinLease:
			c.bad = append(c.bad, fmt.Errorf("%w: gocronlock: minimum hold %v below %v", lock.ErrInvalid, d, lock.MinLease))
			return
		case d > MaxMinHold:
			c.bad = append(c.bad, fmt.Errorf("%w: gocronlock: minimum hold %v above %v", lock.ErrInvalid, d, MaxMinHold))
			return
		}
		c.minHold = d
	}
}

// WithLockBudget bounds how long Lock may take to take both locks,
// from gocron's call: later, it fails the attempt with an error matching
// [context.DeadlineExceeded] ([OutcomeFailed]), releasing what it took.
// A replica's marker then reaches Redis less than d after it fired,
// however long Redis stalls, and the guarantee holds when the replicas
// fire for one run less than the minimum hold less d apart (and for
// successive runs more than the minimum hold plus d apart), with no
// allowance for Redis round trips. A quarter of the shortest minimum
// hold suits a Redis that answers within milliseconds: a slower answer
// fails the attempt (a missed run). It must be positive. Default: none;
// a Redis round trip then counts towards how far apart the replicas
// fire, and a Redis that stalls for longer than the minimum hold while
// a replica fires can let that replica run a tick another one ran.
func WithLockBudget(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.bad = append(c.bad, fmt.Errorf("%w: gocronlock: lock budget %v not positive", lock.ErrInvalid, d))
			return
		}
		c.budget = d
	}
}

// WithKeyPrefix sets the prefix of the lock keys: job name N locks
// prefix+":run:"+N and prefix+":tick:"+N (the lock Client adds its own
// prefix). Default: [DefaultKeyPrefix]. It must not be empty.
func WithKeyPrefix(p string) Option {
	return func(c *config) {
		if p == "" {
			c.bad = append(c.bad, fmt.Errorf("%w: gocronlock: empty key prefix", lock.ErrInvalid))
			return
		}
		c.prefix = p
	}
}

// WithOnAttempt sets a function called with every run attempt's
// [Attempt], once it ended: on the goroutine of gocron's Lock for a
// skipped or failed attempt, of the lock's Unlock for a run. It must not
// block. Default: none.
func WithOnAttempt(f func(Attempt)) Option {
	return func(c *config) { c.onAttempt = f }
}

// WithLogger sets where attempts are logged, at the level of their
// outcome (see [Outcome]). A [*slog.Logger] is a gocron.Logger, and so is
// what gocron.NewLogger returns. Default: [slog.Default].
func WithLogger(l gocron.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

func newConfig(opts []Option) config {
	c := config{prefix: DefaultKeyPrefix, logger: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	return c
}
