package httpkit

import (
	"fmt"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/lockkit/lockkit/lock"
)

// Defaults of [Settings].
const (
	DefaultAcquireTimeout = time.Second // bound of an acquisition without a wait
	DefaultRetryAfter     = time.Second // the Retry-After hint
)

// Settings are the options every lock middleware has; a package's
// options set them, and [NewMiddleware] checks them.
type Settings struct {
	Wait           time.Duration // with WaitSet: how long a request waits for a held key
	WaitSet        bool          // wait (Lock) instead of one attempt (TryLock)
	AcquireTimeout time.Duration // bound of an acquisition without a wait
	RetryAfter     time.Duration // the Retry-After hint
	ConflictStatus int           // the status of a busy answer
	LockOpts       []lock.LockOption
}

// NewSettings returns the default settings of a middleware whose busy
// answer has status busyStatus by default (see [Kind]).
func NewSettings(busyStatus int) Settings {
	return Settings{AcquireTimeout: DefaultAcquireTimeout, RetryAfter: DefaultRetryAfter, ConflictStatus: busyStatus}
}

// finish checks s and returns the lock options of every acquisition under
// template t: s.LockOpts named after t (unless they name the lock), held
// until unlocked, and bounded by the wait or the acquisition timeout.
// Errors name the option at fault.
func (s *Settings) finish(t *Template) ([]lock.LockOption, error) {
	limit := s.AcquireTimeout
	if s.WaitSet {
		if s.Wait <= 0 {
			return nil, fmt.Errorf("WithWait(%v): the wait must be positive", s.Wait)
		}
		limit = s.Wait
	}
	if s.AcquireTimeout <= 0 {
		return nil, fmt.Errorf("WithAcquireTimeout(%v): the timeout must be positive", s.AcquireTimeout)
	}
	if s.RetryAfter <= 0 {
		return nil, fmt.Errorf("WithRetryAfter(%v): the hint must be positive", s.RetryAfter)
	}
	if err := (lock.Integration{}).CheckLockOptions(s.LockOpts...); err != nil {
		return nil, fmt.Errorf("WithLockOptions: %w", err)
	}
	// Held until the handler returns, whatever the client does.
	opts := append(slices.Clip(s.LockOpts), lock.WithHoldUntilUnlock(), lock.WithMaxWait(limit))
	if len(t.text) <= lock.MaxNameLen && utf8.ValidString(t.text) {
		// The route's lock in telemetry is its template, as http.route is
		// the route and not the path; WithLockOptions may name it otherwise.
		opts = append([]lock.LockOption{lock.WithName(t.text)}, opts...)
	}
	if st := s.ConflictStatus; st < 400 || st > 599 || http.StatusText(st) == "" {
		return nil, fmt.Errorf("WithConflictStatus(%d): want a known 4xx or 5xx status", st)
	}
	return opts, nil
}

// Apply applies opts, a package's options, to cfg, its configuration; a
// nil option is an error naming its index.
func Apply[C any, O ~func(*C)](cfg *C, opts []O) error {
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("option %d is nil", i)
		}
		o(cfg)
	}
	return nil
}
