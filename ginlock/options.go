package ginlock

import (
	"errors"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// Option configures the middleware made by [New], [Wrap], [Limit] or
// [RLock]; [Validate] checks options too.
type Option func(*config)

type config struct {
	httpkit.Settings
	onFailure  func(*gin.Context, error) // nil: answer with a problem body
	failureSet bool
	values     []httpkit.NamedValue[*gin.Context]
}

// WithWait makes a request whose key is held (for [Limit]: by limit
// requests) wait up to d for it, instead of being answered at once. When d passes, or the request's context ends
// first (the client went away), the request gets the conflict answer. d
// bounds the whole acquisition, Redis calls included: when Redis does not
// answer within d the request gets 503. d must be positive. Default: no
// wait.
func WithWait(d time.Duration) Option {
	return func(c *config) { c.Wait, c.WaitSet = d, true }
}

// DefaultAcquireTimeout bounds an acquisition without [WithWait].
const DefaultAcquireTimeout = httpkit.DefaultAcquireTimeout

// WithAcquireTimeout bounds an acquisition without [WithWait], Redis calls
// included: when Redis does not answer within d (stalled, unreachable),
// the request gets 503 Service Unavailable rather than holding a goroutine
// and a connection. d must be positive. Default [DefaultAcquireTimeout]
// (1 s).
func WithAcquireTimeout(d time.Duration) Option {
	return func(c *config) { c.AcquireTimeout = d }
}

// DefaultRetryAfter is the Retry-After hint of answers to turned-away
// requests.
const DefaultRetryAfter = httpkit.DefaultRetryAfter

// WithRetryAfter sets the hint sent in the Retry-After header (whole
// seconds, rounded up, at least 1) of a conflict answer and of a 503. A
// conflict answer never hints later than the holder's remaining lease.
// d must be positive. Default [DefaultRetryAfter] (1 s): a holder usually
// finishes long before its lease ends, so the lease is a poor hint.
func WithRetryAfter(d time.Duration) Option {
	return func(c *config) { c.RetryAfter = d }
}

// WithConflictStatus sets the HTTP status of the answer to a request whose
// key is held, such as [http.StatusLocked] or
// [http.StatusTooManyRequests]. It must be a 4xx or 5xx status known to
// [http.StatusText]. Default [http.StatusConflict] (409), and
// [http.StatusTooManyRequests] (429) for [Limit]. A failure
// handler set with [WithFailureHandler] replaces the answer, status
// included.
func WithConflictStatus(code int) Option {
	return func(c *config) { c.ConflictStatus = code }
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
	return func(c *config) { c.LockOpts = append(c.LockOpts, opts...) }
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
