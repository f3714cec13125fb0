package ginlock

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// New returns gin middleware that holds a lock while the rest of the
// handler chain runs. key is a key template (see the package
// documentation): literal text with placeholders such as {id} (path
// parameter), {query.tenant}, {header.X-Tenant} and {value.name} (see
// [WithValue]), each filled with the request's escaped value.
//
// For each request the middleware
//   - answers 400 Bad Request when a placeholder's value is missing or
//     empty, without a Redis call;
//   - takes the key with locker.TryLock (locker.Lock with [WithWait]),
//     using the request's context, so a handler chain already holding the
//     key (an outer ginlock middleware with the same key) re-enters it; the
//     whole acquisition, Redis calls included, is bounded by [WithWait] or
//     [WithAcquireTimeout] (1 s by default);
//   - when another request holds the key, answers 409 Conflict with a
//     Retry-After header: the hint set with [WithRetryAfter] (1 s by
//     default), never later than the holder's remaining lease;
//   - when the lock cannot be taken for any other reason (Redis stalled or
//     unreachable, closed Client), answers 503 Service Unavailable with
//     Retry-After, or 500 Internal Server Error for invalid lock options,
//     and does not run the handler;
//   - otherwise runs the rest of the chain with c.Request's context
//     replaced by the lock context, and holds the lock, renewing its lease,
//     from then until the chain returns or panics (the panic goes on to
//     gin's recovery), whatever the client does (see
//     [lock.WithHoldUntilUnlock]). The lock context is cancelled with
//     cause [context.Canceled] when the client goes away (the lock is still
//     held: the handler decides whether to finish), with cause
//     [lock.ErrLost] if the lease is lost, and, when the chain returns,
//     with a cause matching [lock.ErrNotHeld], before the release is sent.
//     Afterwards c.Request's context is the request's own again, with the
//     values the inner chain attached.
//
// A middleware that detaches the handler from the chain (a timeout that
// answers and lets the handler go on) must come before New, or the lock
// ends while the handler runs; [Wrap] is safe in either place (see
// "Middlewares that detach the handler" in the package documentation).
//
// Answers are RFC 9457 problem bodies (Content-Type
// application/problem+json); [WithConflictStatus] and [WithFailureHandler]
// change them. A held key is not an error: it is not passed to
// [gin.Context.Error], so access logs and tracing do not report contention
// as a failure. Real failures, and a lease lost or a Client closed while
// the chain ran ([lock.ErrLost], [lock.ErrClosed]), are passed to it,
// with the key template in their text, never the request's key (the
// error they wrap, reached with [errors.Unwrap], has it).
//
// The release is sent when the chain returns, on a goroutine of its own,
// and the answer waits for it 100 ms at most: on a Redis that answers,
// the key is free before the client reads the answer, so the client's
// next request, to any replica, is not turned away by this one; a stalled
// Redis holds the answer back no longer (not by the unlock's 1 s bound).
// The lock Client bounds that goroutine as any unlock, by its release
// timeout (1 s), also when a middleware set a longer deadline on the
// request (the lock is taken without it, and the handler's context
// reports it); a release Redis did not confirm then goes on in the
// Client's background until Redis answers or Close. Its outcome reaches
// the Client's Observer (see package otellock), not c.Error.
//
// Defaults: no wait, status 409 for a held key, the [lock.Client]'s lease.
//
// New panics, naming the template and the problem, when locker is nil or
// the template or an option is invalid; [Validate] reports the same
// problems as an error. Nothing is checked per request that could be
// checked here.
func New(locker lock.Locker, key string, opts ...Option) gin.HandlerFunc {
	m := mustMiddleware("New", key, opts, httpkit.LockKind(locker))
	return func(c *gin.Context) { m.serve(c, nil) }
}

// Wrap returns handler h holding the lock on key while h runs: the same
// as [New] followed by h, except that the lock is taken and released by
// the returned handler itself, on whatever goroutine runs it. Use it when
// a middleware may run the handler detached from the chain, such as a
// timeout middleware that answers 504 and lets the handler go on: with
// New in front of such a middleware the lock ends when the chain returns,
// while the handler still runs. Wrap the handler that does the work, as
// the innermost layer:
//
//	r.POST("/orders/:id/pay", timeout(ginlock.Wrap(locker, "orders:{id}", pay)))
//
// and not ginlock.Wrap(locker, key, timeout(pay)), which detaches pay from
// the lock again. Handlers after the returned one in the chain, and those
// h runs with c.Next, run after and under the lock respectively. Inside
// a New of the same key (a route group's), Wrap re-enters that hold,
// which then ends when both New's chain and h have returned, also when h
// runs detached from New's chain.
//
// Wrap panics, as New does, on invalid arguments, and when h is nil.
func Wrap(locker lock.Locker, key string, h gin.HandlerFunc, opts ...Option) gin.HandlerFunc {
	if h == nil {
		panic(fmt.Errorf("ginlock: Wrap(%q): nil handler", key))
	}
	m := mustMiddleware("Wrap", key, opts, httpkit.LockKind(locker))
	return func(c *gin.Context) { m.serve(c, h) }
}

// mustMiddleware is the middleware of the constructor fn holding key as
// k says, or a panic naming the problem.
func mustMiddleware(fn string, key string, opts []Option, k httpkit.Kind) *middleware {
	m, err := newMiddleware(key, k.BusyStatus, opts)
	if err == nil {
		err = m.Use(fn, k)
	}
	if err != nil {
		panic(err)
	}
	return m
}

// Validate reports whether [New] accepts the key template key with opts,
// and if not, why: the error names the template and the problem. [Wrap],
// [Limit] and [RLock] accept the same templates and options.
func Validate(key string, opts ...Option) error {
	_, err := newMiddleware(key, http.StatusConflict, opts)
	return err
}

type middleware struct {
	*httpkit.Middleware
	onFailure func(*gin.Context, error) // nil: answer with a problem body
	values    map[string]func(*gin.Context) string
}

// newMiddleware parses key and applies opts; status is the default of
// the answer to a full key.
func newMiddleware(key string, status int, opts []Option) (*middleware, error) {
	cfg := config{Settings: httpkit.NewSettings(status)}
	m := &middleware{}
	var err error
	m.Middleware, err = httpkit.NewMiddleware(pkg, key, func() (httpkit.Settings, error) {
		err := cfg.apply(opts)
		return cfg.Settings, err
	}, func(t *httpkit.Template) error {
		m.values, err = httpkit.BindValues(t, cfg.values)
		return err
	})
	if err != nil {
		return nil, err
	}
	m.onFailure = cfg.onFailure
	return m, nil
}

// serve runs h, or the rest of the chain when h is nil, holding the
// request's lock.
func (m *middleware) serve(c *gin.Context, h gin.HandlerFunc) {
	key, err := httpkit.Key(m.Tmpl, ginRequest{c, m.values})
	if err != nil {
		m.fail(c, err)
		return
	}
	outer := c.Request.Context()
	err = m.Hold(outer, key, h != nil, func(hctx context.Context) {
		prev, had := c.Get(keyName)
		c.Set(keyName, key)
		c.Request = c.Request.WithContext(hctx)
		defer func() {
			c.Request = httpkit.Restore(outer, hctx, c.Request)
			if !had {
				prev = "" // Key(c) is "" again; the key leaves c.Keys
			}
			c.Set(keyName, prev)
		}()
		if h == nil {
			c.Next()
		} else {
			h(c)
		}
	}, func(ended error) {
		if ended != nil {
			_ = c.Error(m.Tmpl.Redact(ended))
		}
	})
	if err != nil {
		m.fail(c, err)
	}
}

// fail turns the request away: the chain is aborted and the failure
// handler answers; err goes to c.Error unless the key is merely held.
func (m *middleware) fail(c *gin.Context, err error) {
	if !httpkit.Busy(err) {
		_ = c.Error(m.Tmpl.Redact(err))
	}
	c.Abort()
	if m.onFailure != nil {
		m.onFailure(c, err)
		return
	}
	m.Refusal.Write(c.Writer, err)
}
