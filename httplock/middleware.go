package httplock

import (
	"context"
	"fmt"
	"net/http"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// New returns net/http middleware that holds a lock while the handler it
// wraps runs. key is a key template (see the package documentation):
// literal text with placeholders such as {id} (the path value id of the
// route's [http.ServeMux] pattern, r.PathValue("id")), {query.tenant},
// {header.X-Tenant} and {value.name} (see [WithValue]), each filled with
// the request's escaped value:
//
//	mux.Handle("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}")(pay))
//
// For each request the middleware
//   - answers 400 Bad Request when a placeholder's value is missing or
//     empty, without a Redis call, and 500 Internal Server Error when the
//     template names a path value that the pattern of the route the
//     request matched (r.Pattern) lacks: the route is misconfigured;
//   - takes the key with locker.TryLock (locker.Lock with [WithWait]),
//     using the request's context, so a request already holding the key
//     (an outer httplock middleware with the same key) re-enters it; the
//     whole acquisition, Redis calls included, is bounded by [WithWait] or
//     [WithAcquireTimeout] (1 s by default);
//   - when another request holds the key, answers 409 Conflict with a
//     Retry-After header: the hint set with [WithRetryAfter] (1 s by
//     default), never later than the holder's remaining lease;
//   - when the lock cannot be taken for any other reason (Redis stalled or
//     unreachable, closed Client), answers 503 Service Unavailable with
//     Retry-After, or 500 for invalid lock options, and does not run the
//     handler;
//   - otherwise runs the handler with a request whose context is the lock
//     context, and holds the lock, renewing its lease, until the handler
//     returns or panics (the panic goes on, to the server), whatever the
//     client does (see [lock.WithHoldUntilUnlock]). The lock context is
//     cancelled with cause [context.Canceled] when the client goes away
//     (the lock is still held: the handler decides whether to finish),
//     with cause [lock.ErrLost] if the lease is lost, and, when the
//     handler returns, with a cause matching [lock.ErrNotHeld], before the
//     release is sent.
//
// The lock is taken and released by the middleware around the handler,
// on whatever goroutine runs it, so it may sit inside or outside a
// middleware that runs the handler detached ([http.TimeoutHandler]): an
// httplock middleware inside another of the same key, with a detaching
// middleware between them, keeps the outer hold until its own handler has
// returned too. The release, the 100 ms the answer waits for it at most,
// the request's deadline and the error texts behave as in ginlock (see
// [github.com/lockkit/lockkit/ginlock.New]).
//
// Answers are RFC 9457 problem bodies (Content-Type
// application/problem+json); [WithConflictStatus] and [WithFailureHandler]
// change them. net/http has no per-request error list: a lease lost while
// the handler ran shows in its context's cause and in the lock Client's
// Observer (see package otellock).
//
// Defaults: no wait, status 409 for a held key, the [lock.Client]'s lease.
//
// New panics, naming the template and the problem, when locker is nil or
// the template or an option is invalid, and the middleware panics when
// given a nil handler; [Validate] reports the same problems as an error.
// Nothing is checked per request that could be checked here.
func New(locker lock.Locker, key string, opts ...Option) func(http.Handler) http.Handler {
	return mustMiddleware("New", key, opts, httpkit.LockKind(locker)).wrap
}

// Validate reports whether [New] accepts the key template key with opts,
// and if not, why: the error names the template and the problem. [Limit]
// and [RLock] accept the same templates and options.
func Validate(key string, opts ...Option) error {
	_, err := newMiddleware(key, http.StatusConflict, opts)
	return err
}

type middleware struct {
	*httpkit.Middleware
	onFailure func(http.ResponseWriter, *http.Request, error) // nil: answer with a problem body
	values    map[string]func(*http.Request) string
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

// wrap returns next holding the request's lock.
func (m *middleware) wrap(next http.Handler) http.Handler {
	if next == nil {
		panic(fmt.Errorf("httplock: template %q: nil handler", m.Tmpl))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// serve runs next holding the request's lock, or answers.
func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, err := httpkit.Key(m.Tmpl, request{r, m.values})
	if err == nil {
		err = m.Hold(r.Context(), key, true, func(ctx context.Context) {
			next.ServeHTTP(w, r.WithContext(ctx))
		}, nil)
	}
	if err == nil {
		return
	}
	if m.onFailure != nil {
		m.onFailure(w, r, err)
		return
	}
	m.Refusal.Write(w, err)
}
