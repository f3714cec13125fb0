package leader

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// Defaults of [WithBackoff].
const (
	defaultBackoff    = 100 * time.Millisecond
	defaultMaxBackoff = 30 * time.Second
)

// An Option configures an [Election].
type Option func(*config)

type config struct {
	lockOpts            []lock.LockOption
	backoff, maxBackoff time.Duration
	logger              *slog.Logger
	bad                 []error
}

// WithLease sets the lease of the election's lock, renewed by the
// watchdog every third of it while this process leads: a crashed leader
// is replaced within it. Default: the Client's default lease
// ([lock.WithDefaultLease]). It returns an error from [New] when d is
// shorter than [lock.MinLease]; a lease the Client refuses for its drift
// allowance ([lock.WithDrift]) makes [Election.Run] return that error.
func WithLease(d time.Duration) Option {
	return func(c *config) {
		if d < lock.MinLease {
			c.bad = append(c.bad, fmt.Errorf("%w: leader: lease %v is shorter than lock.MinLease %v", lock.ErrInvalid, d, lock.MinLease))
			return
		}
		c.lockOpts = append(c.lockOpts, lock.WithLease(d))
	}
}

// WithBackoff sets the pause between a term's end (or a failed campaign)
// and the next campaign: initial after a term that ended well, doubling
// up to max while terms end with lead's error, a panic or a loss, or
// campaigns fail with a Redis error, in a row. Defaults: 100 ms and 30 s.
// It returns an error from [New] unless 0 < initial <= max.
func WithBackoff(initial, max time.Duration) Option {
	return func(c *config) {
		if initial <= 0 || max < initial {
			c.bad = append(c.bad, fmt.Errorf("%w: leader: back-off %v to %v: want 0 < initial <= max", lock.ErrInvalid, initial, max))
			return
		}
		c.backoff, c.maxBackoff = initial, max
	}
}

// WithLogger sets where failed campaigns, lead's errors (while ctx is on
// and leadership was not lost) and panics (always, with their stack) are
// logged, at level Warn. Default: [slog.Default]. A nil l returns an
// error from [New]; use slog.New(slog.DiscardHandler) for no logging.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.bad = append(c.bad, fmt.Errorf("%w: leader: nil logger", lock.ErrInvalid))
			return
		}
		c.logger = l
	}
}
