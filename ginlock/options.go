package ginlock

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// Option configures the middleware made by [New], [Wrap], [Limit] or
// [RLock]; [Validate] checks options too.
type Option func(*config)

type config struct {
	wait           time.Duration
	waitSet        bool          // WithWait given: Lock instead of TryLock
	acquireTimeout time.Duration // without WithWait
	limit          time.Duration // bound of an acquisition: wait or acquireTimeout
	retryAfter     time.Duration
	conflictStatus int
	onFailure      func(*gin.Context, error) // nil: answer with a problem body
	failureSet     bool
	lockOpts       []lock.LockOption
	values         []httpkit.NamedValue[*gin.Context]
	valueFns       map[string]func(*gin.Context) string // values by name, once checked
}

// WithWait makes a request whose key is held (for [Limit]: by limit
// requests) wait up to d for it, instead of being answered at once. When d passes, or the request's context ends
// first (the client went away), the request gets the conflict answer. d
// bounds the whole acquisition, Redis calls included: when Redis does not
// answer within d the request gets 503. d must be positive. Default: no
// wait.
func WithWait(d time.Duration) Option {
	return func(c *config) { c.wait, c.waitSet = d, true }
}

// DefaultAcquireTimeout bounds an acquisition without [WithWait].
const DefaultAcquireTimeout = time.Second

// WithAcquireTimeout bounds an acquisition without [WithWait], Redis calls
// included: when Redis does not answer within d (stalled, unreachable),
// the request gets 503 Service Unavailable rather than holding a goroutine
// and a connection. d must be positive. Default [DefaultAcquireTimeout]
// (1 s).
func WithAcquireTimeout(d time.Duration) Option {
	return func(c *config) { c.acquireTimeout = d }
}

// DefaultRetryAfter is the Retry-After hint of answers to turned-away
// requests.
const DefaultRetryAfter = time.Second

// WithRetryAfter sets the hint sent in the Retry-After header (whole
// seconds, rounded up, at least 1) of a conflict answer and of a 503. A
// conflict answer never hints later than the holder's remaining lease.
// d must be positive. Default [DefaultRetryAfter] (1 s): a holder usually
// finishes long before its lease ends, so the lease is a poor hint.
func WithRetryAfter(d time.Duration) Option {
	return func(c *config) { c.retryAfter = d }
}

// WithConflictStatus sets the HTTP status of the answer to a request whose
// key is held, such as [http.StatusLocked] or
// [http.StatusTooManyRequests]. It must be a 4xx or 5xx status known to
// [http.StatusText]. Default [http.StatusConflict] (409), and
// [http.StatusTooManyRequests] (429) for [Limit]. A failure
// handler set with [WithFailureHandler] replaces the answer, status
// included.
func WithConflictStatus(code int) Option {
	return func(c *config) { c.conflictStatus = code }
}

// WithFailureHandler makes fn answer every request the middleware turns
// away, instead of the default RFC 9457 problem body. err tells why:
//   - it matches [ErrMissingValue] when a key value is missing or empty;
//   - it matches [lock.ErrNotObtained] when another request holds the key
//     (for [Limit]: limit requests hold it; use [errors.As] with
//     [*lock.NotObtainedError] for the holder's remaining lease);
//   - otherwise the lock could not be taken: Redis is unreachable or
//     failing, the [lock.Client] is closed, or the lock options are
//     invalid ([lock.ErrInvalid]).
//
// fn must write the response. The handler chain is aborted before fn is
// called, and err has already been passed to [gin.Context.Error].
func WithFailureHandler(fn func(c *gin.Context, err error)) Option {
	return func(c *config) { c.onFailure, c.failureSet = fn, true }
}

// WithLockOptions passes opts to every acquisition, such as
// [lock.WithLease] or [lock.WithFixedLease]. The middleware adds
// [lock.WithHoldUntilUnlock] and a [lock.WithMaxWait] of its own (from
// [WithWait] or [WithAcquireTimeout]), and names the lock for telemetry
// after the key template with [lock.WithName] ("orders:{id}"), which a
// WithName in opts replaces. Default: none, so the [lock.Client]'s
// defaults hold.
func WithLockOptions(opts ...lock.LockOption) Option {
	return func(c *config) { c.lockOpts = append(c.lockOpts, opts...) }
}

// WithValue defines the placeholder {value.name} of the key template: its
// value for a request is what fn returns, for keys a template cannot
// express, such as the authenticated user that an earlier middleware
// stored with [gin.Context.Set]. An empty result is a missing value (400
// Bad Request). fn runs on the request's goroutine before the lock is
// taken; it must not be nil, and the template must use name.
func WithValue(name string, fn func(c *gin.Context) string) Option {
	return func(c *config) { c.values = append(c.values, httpkit.NamedValue[*gin.Context]{Name: name, Fn: fn}) }
}

// newConfig applies opts and checks them against the parsed template t,
// to which it binds the WithValue functions; status is the default of
// the answer to a full key.
func newConfig(t *httpkit.Template, status int, opts []Option) (config, error) {
	cfg := config{conflictStatus: status, acquireTimeout: DefaultAcquireTimeout, retryAfter: DefaultRetryAfter}
	for i, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("option %d is nil", i)
		}
		o(&cfg)
	}
	if cfg.failureSet && cfg.onFailure == nil {
		return cfg, errors.New("WithFailureHandler(nil)")
	}
	limit := cfg.acquireTimeout
	if cfg.waitSet {
		if cfg.wait <= 0 {
			return cfg, fmt.Errorf("WithWait(%v): the wait must be positive", cfg.wait)
		}
		limit = cfg.wait
	}
	if cfg.acquireTimeout <= 0 {
		return cfg, fmt.Errorf("WithAcquireTimeout(%v): the timeout must be positive", cfg.acquireTimeout)
	}
	if cfg.retryAfter <= 0 {
		return cfg, fmt.Errorf("WithRetryAfter(%v): the hint must be positive", cfg.retryAfter)
	}
	if err := (lock.Integration{}).CheckLockOptions(cfg.lockOpts...); err != nil {
		return cfg, fmt.Errorf("WithLockOptions: %w", err)
	}
	// Held until the handler chain returns, whatever the client does.
	cfg.limit = limit
	cfg.lockOpts = append(slices.Clip(cfg.lockOpts), lock.WithHoldUntilUnlock(), lock.WithMaxWait(limit))
	if len(t.String()) <= lock.MaxNameLen && utf8.ValidString(t.String()) {
		// The route's lock in telemetry is its template, as http.route is
		// the route and not the path; WithLockOptions may name it otherwise.
		cfg.lockOpts = append([]lock.LockOption{lock.WithName(t.String())}, cfg.lockOpts...)
	}
	if s := cfg.conflictStatus; s < 400 || s > 599 || http.StatusText(s) == "" {
		return cfg, fmt.Errorf("WithConflictStatus(%d): want a known 4xx or 5xx status", s)
	}
	fns, err := httpkit.BindValues(t, cfg.values)
	cfg.valueFns = fns
	return cfg, err
}
