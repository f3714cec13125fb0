package ginlock

import (
	"context"
	"fmt"

	"github.com/gin-gonic/gin"

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
//     key (an outer ginlock middleware with the same key) re-enters it;
//   - when another request holds the key, answers 409 Conflict with a
//     Retry-After header (the holder's remaining lease in whole seconds,
//     rounded up; 1 when unknown);
//   - when the lock cannot be taken for any other reason (Redis
//     unreachable, closed Client), answers 503 Service Unavailable, or 500
//     Internal Server Error for invalid lock options, and does not run the
//     handler;
//   - otherwise runs the rest of the chain with c.Request's context
//     replaced by the lock context, which is cancelled with cause
//     [lock.ErrLost] if the lease is lost, and releases the lock when the
//     chain returns, also when it panics (the panic goes on to gin's
//     recovery) or the client has gone away. c.Request is restored
//     afterwards.
//
// Answers are RFC 9457 problem bodies (Content-Type
// application/problem+json); [WithConflictStatus] and [WithFailureHandler]
// change them. Every failure, and an error of the release, is also passed
// to [gin.Context.Error].
//
// Defaults: no wait, status 409 for a held key, the [lock.Client]'s lease.
//
// New panics, naming the template and the problem, when locker is nil or
// the template or an option is invalid; [Validate] reports the same
// problems as an error. Nothing is checked per request that could be
// checked here.
func New(locker lock.Locker, key string, opts ...Option) gin.HandlerFunc {
	m, err := newMiddleware(key, opts)
	if err == nil && isNil(locker) {
		err = fmt.Errorf("ginlock: New(nil Locker, %q)", key)
	}
	if err != nil {
		panic(err)
	}
	m.locker = locker
	return m.handle
}

// Validate reports whether [New] accepts the key template key with opts,
// and if not, why: the error names the template and the problem.
func Validate(key string, opts ...Option) error {
	_, err := newMiddleware(key, opts)
	return err
}

func isNil(l lock.Locker) bool {
	c, ok := l.(*lock.Client)
	return l == nil || ok && c == nil
}

type middleware struct {
	locker lock.Locker
	tmpl   *template
	cfg    config
}

func newMiddleware(key string, opts []Option) (*middleware, error) {
	t, err := parseTemplate(key)
	if err != nil {
		return nil, fmt.Errorf("ginlock: template %q: %w", key, err)
	}
	cfg, err := newConfig(t, opts)
	if err != nil {
		return nil, fmt.Errorf("ginlock: template %q: %w", key, err)
	}
	return &middleware{tmpl: t, cfg: cfg}, nil
}

func (m *middleware) handle(c *gin.Context) {
	key, err := m.tmpl.key(c)
	if err != nil {
		m.fail(c, err)
		return
	}
	held, unlock, err := m.acquire(c.Request.Context(), key)
	if err != nil {
		m.fail(c, err)
		return
	}
	req := c.Request
	c.Request = req.WithContext(held)
	defer func() {
		c.Request = req
		if err := unlock(); err != nil {
			_ = c.Error(err)
		}
	}()
	c.Next()
}

func (m *middleware) acquire(ctx context.Context, key string) (context.Context, lock.UnlockFunc, error) {
	if m.cfg.waitSet {
		return m.locker.Lock(ctx, key, m.cfg.lockOpts...)
	}
	return m.locker.TryLock(ctx, key, m.cfg.lockOpts...)
}

// fail turns the request away: err goes to c.Error, the chain is aborted
// and the failure handler answers.
func (m *middleware) fail(c *gin.Context, err error) {
	_ = c.Error(err)
	c.Abort()
	if m.cfg.onFailure != nil {
		m.cfg.onFailure(c, err)
		return
	}
	m.answer(c, err)
}
