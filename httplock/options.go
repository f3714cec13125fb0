package httplock

import (
	"errors"
	"net/http"
	"time"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// Option configures the middleware made by [New], [Limit] or [RLock];
// [Validate] checks options too. Each means what the ginlock option of
// the same name does.
type Option func(*config)

type config struct {
	httpkit.Settings
	onFailure  func(http.ResponseWriter, *http.Request, error) // nil: answer with a problem body
	failureSet bool
	values     []httpkit.NamedValue[*http.Request]
}

// DefaultAcquireTimeout bounds an acquisition without [WithWait].
const DefaultAcquireTimeout = httpkit.DefaultAcquireTimeout

// DefaultRetryAfter is the Retry-After hint of answers to turned-away
// requests.
const DefaultRetryAfter = httpkit.DefaultRetryAfter

// WithWait makes a request whose key is held (for [Limit]: by limit
// requests) wait up to d for it, instead of being answered at once. When
// d passes, or the request's context ends first (the client went away),
// the request gets the conflict answer; when Redis does not answer
// within d, 503. d must be positive. Default: no wait.
func WithWait(d time.Duration) Option {
	return func(c *config) { c.Wait, c.WaitSet = d, true }
}

// WithAcquireTimeout bounds an acquisition without [WithWait], Redis calls
// included: when Redis does not answer within d (stalled, unreachable),
// the request gets 503 Service Unavailable. d must be positive. Default
// [DefaultAcquireTimeout] (1 s).
func WithAcquireTimeout(d time.Duration) Option {
	return func(c *config) { c.AcquireTimeout = d }
}

// WithRetryAfter sets the hint sent in the Retry-After header (whole
// seconds, rounded up, at least 1) of a conflict answer and of a 503. A
// conflict answer never hints later than the holder's remaining lease.
// d must be positive. Default [DefaultRetryAfter] (1 s).
func WithRetryAfter(d time.Duration) Option {
	return func(c *config) { c.RetryAfter = d }
}

// WithConflictStatus sets the HTTP status of the answer to a request whose
// key is held, such as [http.StatusLocked]. It must be a 4xx or 5xx
// status known to [http.StatusText]. Default [http.StatusConflict] (409),
// and [http.StatusTooManyRequests] (429) for [Limit].
func WithConflictStatus(code int) Option {
	return func(c *config) { c.ConflictStatus = code }
}

// WithFailureHandler makes fn answer every request the middleware turns
// away, instead of the default RFC 9457 problem body; the handler does not
// run. err tells why:
//   - it matches [ErrMissingValue] when a key value is missing or empty;
//   - it matches [lock.ErrNotObtained] when another request holds the key
//     (for [Limit]: limit requests hold it; use [errors.As] with
//     [*lock.NotObtainedError] for the holder's remaining lease);
//   - otherwise the lock could not be taken: Redis is unreachable or
//     failing, the [lock.Client] is closed, the lock options are invalid
//     ([lock.ErrInvalid]), or the template names a path value the route's
//     pattern lacks.
//
// fn must write the response.
func WithFailureHandler(fn func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) { c.onFailure, c.failureSet = fn, true }
}

// WithLockOptions passes opts to every acquisition, such as
// [lock.WithLease] or [lock.WithFixedLease]. The middleware adds
// [lock.WithHoldUntilUnlock] and a [lock.WithMaxWait] of its own (from
// [WithWait] or [WithAcquireTimeout]), and names the lock after the key
// template with [lock.WithName], which a WithName in opts replaces.
// Default: none, so the [lock.Client]'s defaults hold.
func WithLockOptions(opts ...lock.LockOption) Option {
	return func(c *config) { c.LockOpts = append(c.LockOpts, opts...) }
}

// WithValue defines the placeholder {value.name} of the key template: its
// value for a request is what fn returns, for keys a template cannot
// express, such as the authenticated user an earlier middleware put in
// the request's context. An empty result is a missing value (400 Bad
// Request). fn runs on the request's goroutine before the lock is taken;
// it must not be nil, and the template must use name.
func WithValue(name string, fn func(r *http.Request) string) Option {
	return func(c *config) {
		c.values = append(c.values, httpkit.NamedValue[*http.Request]{Name: name, Fn: fn})
	}
}

// apply applies opts to c; the settings are checked later, with the
// template.
func (c *config) apply(opts []Option) error {
	if err := httpkit.Apply(c, opts); err != nil {
		return err
	}
	if c.failureSet && c.onFailure == nil {
		return errors.New("WithFailureHandler(nil)")
	}
	return nil
}
