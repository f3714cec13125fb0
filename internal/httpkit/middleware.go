package httpkit

import (
	"context"
	"fmt"

	"github.com/lockkit/lockkit/lock"
)

// Middleware is a checked lock middleware of some framework: the key it
// renders, how it takes it, its settings and its answers.
type Middleware struct {
	Kind
	Tmpl     *Template
	Refusal  Refusal           // the default answers to requests turned away
	wait     bool              // Lock (wait) instead of TryLock
	lockOpts []lock.LockOption // of every acquisition
}

// NewMiddleware parses key, a template of pkg's middlewares, then calls
// apply, which applies the package's options and returns their settings,
// checks those settings, and calls bind, which binds the package's
// {value.name} functions to the template. Errors, those of apply and bind
// included, name pkg, the template and the problem. [Middleware.Use]
// gives the result its [Kind].
func NewMiddleware(pkg *Pkg, key string, apply func() (Settings, error), bind func(*Template) error) (*Middleware, error) {
	m, err := newMiddleware(pkg, key, apply, bind)
	if err != nil {
		return nil, fmt.Errorf("%s: template %q: %w", pkg.Name, key, err)
	}
	return m, nil
}

func newMiddleware(pkg *Pkg, key string, apply func() (Settings, error), bind func(*Template) error) (*Middleware, error) {
	t, err := ParseTemplate(pkg, key)
	if err != nil {
		return nil, err
	}
	s, err := apply()
	if err != nil {
		return nil, err
	}
	opts, err := s.finish(t)
	if err != nil {
		return nil, err
	}
	if err := bind(t); err != nil {
		return nil, err
	}
	return &Middleware{
		Tmpl:     t,
		Refusal:  Refusal{BusyStatus: s.ConflictStatus, RetryAfter: s.RetryAfter},
		wait:     s.WaitSet,
		lockOpts: opts,
	}, nil
}

// Use makes m take its keys as k says, for the constructor fn (for
// errors: "New"): it fails when k's Locker is nil or rejects m's lock
// options.
func (m *Middleware) Use(fn string, k Kind) error {
	pkg, key := m.Tmpl.pkg.Name, m.Tmpl.text
	if isNil(k.Locker) {
		return fmt.Errorf("%s: %s(nil %s, %q)", pkg, fn, k.Iface, key)
	}
	if c, ok := k.Locker.(integrated); ok {
		if err := c.Integration().CheckLockOptions(m.lockOpts...); err != nil {
			return fmt.Errorf("%s: template %q: WithLockOptions: %w", pkg, key, err)
		}
	}
	m.Kind = k
	m.Refusal.BusyDetail = k.BusyDetail
	return nil
}

// integrated is a Locker that checks lock options against its own
// defaults, as a [lock.Client] does through [lock.Integration].
type integrated interface {
	Integration() lock.Integration
}

// Hold runs run holding key for a request whose context is outer, and
// returns the error why it could not take key (run has not run then; the
// caller answers with it). run gets the handler's context: the lock
// context, with outer's deadline, cancelled with cause [context.Canceled]
// when the client goes away, [lock.ErrLost] if the lease is lost, and
// with a cause matching [lock.ErrNotHeld] once run has returned (or
// panicked: the panic goes on), before the release ([Release]) is sent.
// after, unless nil, runs then, first, with [lock.ErrLost] or
// [lock.ErrClosed] when the hold ended while run ran, else nil.
//
// An outer hold of key in outer, from the same Locker, is re-entered. A
// wrapped middleware (which runs its handler itself, maybe detached from
// the outer chain) keeps that hold until run has returned too; when it
// is being released already, Hold fails with an error matching
// [lock.ErrNotObtained].
func (m *Middleware) Hold(outer context.Context, key string, wrapped bool, run func(context.Context), after func(ended error)) error {
	exitOuter := func() {}
	in := enclosing(outer, m.Locker, key)
	if wrapped && in != nil && lock.Held(outer, key) {
		if !in.enter() {
			// The outer chain returned and its hold is being released:
			// re-entering it would run the handler without the key.
			return m.Tmpl.pkg.errOuterEnded
		}
		exitOuter = in.exit
	}
	handedOver := false // exitOuter then runs when this hold ends
	defer func() {
		if !handedOver {
			exitOuter()
		}
	}()
	held, unlock, err := m.acquire(outer, key)
	if err != nil {
		return err
	}
	tracked := lock.Held(held, key)
	// The handler's context ends before the release is sent, so that a
	// handler detached from the chain learns it before anyone else can
	// take the key.
	lctx, end := context.WithCancelCause(held)
	hold := &wraps{key: key, locker: m.Locker, outer: innermostHold(outer)}
	defer func() {
		if after != nil {
			after(holdEnded(held, key, tracked))
		}
		handedOver = true
		hold.afterChain(func() {
			end(m.Tmpl.pkg.errReturned)
			Release(unlock)
			exitOuter()
		})
	}()
	run(handlerContext(context.WithValue(lctx, holdKey{}, hold), outer))
	return nil
}

// acquire takes key for a request whose context is ctx, within the
// acquisition bound (and ctx's cancellation, deadline included).
func (m *Middleware) acquire(ctx context.Context, key string) (context.Context, lock.UnlockFunc, error) {
	if _, ok := ctx.Deadline(); ok {
		ctx = noDeadline{ctx}
	}
	return m.take(ctx, key, m.wait, m.lockOpts)
}
