package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// Key is the lock key of the election called name: "leader:" + name.
func Key(name string) string { return "leader:" + name }

// An Election campaigns for one name on behalf of this process. Create it
// with [New]; it is safe for concurrent use.
type Election struct {
	locker lock.Locker
	name   string
	cfg    config
	pause  func(ctx context.Context, d time.Duration) bool // sleep; tests replace it

	mu      sync.Mutex
	running bool            // a Run is under way
	term    context.Context // the lead context of the current term; nil between terms
	checked bool            // lock.Held tells whether term's hold is live (a lock.Client's)
}

// New returns an Election for name (not empty) on locker. It returns an
// error matching [lock.ErrInvalid] for a nil locker (a nil *lock.Client
// too), an empty name or a bad or nil option.
func New(locker lock.Locker, name string, opts ...Option) (*Election, error) {
	if isNil(locker) {
		return nil, fmt.Errorf("%w: leader: nil locker", lock.ErrInvalid)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: leader: empty election name", lock.ErrInvalid)
	}
	cfg := config{backoff: defaultBackoff, maxBackoff: defaultMaxBackoff, logger: slog.Default()}
	for _, o := range opts {
		if o == nil {
			cfg.bad = append(cfg.bad, fmt.Errorf("%w: leader: nil option", lock.ErrInvalid))
			continue
		}
		o(&cfg)
	}
	if err := errors.Join(cfg.bad...); err != nil {
		return nil, err
	}
	return &Election{locker: locker, name: name, cfg: cfg, pause: sleep}, nil
}

// isNil reports whether v, a Locker or an Inspector, is nil or a nil
// *lock.Client.
func isNil(v any) bool {
	switch c := v.(type) {
	case nil:
		return true
	case *lock.Client:
		return c == nil
	}
	return false
}

// Run campaigns for name until ctx ends: New(locker, name, opts...), then
// [Election.Run] with lead. It returns New's error or Election.Run's.
func Run(ctx context.Context, locker lock.Locker, name string, lead func(ctx context.Context) error, opts ...Option) error {
	e, err := New(locker, name, opts...)
	if err != nil {
		return err
	}
	return e.Run(ctx, lead)
}

// Run campaigns until ctx ends, and returns ctx's error; or, at once,
// the error of a campaign that cannot succeed, matching [lock.ErrClosed]
// (the Client was closed) or [lock.ErrInvalid] (it refuses the lease).
//
// A campaign waits for the election's lock ([lock.Locker.Lock], queued
// first come, first served). Once it holds it, this process leads: lead
// runs with the lock's context, which is cancelled when leadership is lost
// (cause [lock.ErrLost]) or ctx ends. When lead returns, or panics (the
// panic is logged with its stack, and counts as an error), Run resigns:
// it releases the lock, which goes to the next replica at once. Then it
// campaigns again, after a pause: the back-off ([WithBackoff]), which
// doubles while terms end with an error or a loss, or campaigns fail, in
// a row. A lead that ends its goroutine with runtime.Goexit (t.FailNow)
// ends Run's too, after Run resigned.
//
// Run does not return while lead runs: after ctx ends it waits for lead
// to return, then for Redis to confirm the resignation, which the lock's
// unlock bounds: until ctx's deadline + 50 ms or for 1 s, whichever ends
// first, when Redis does not answer (the lease then lapses by itself). A campaign under way when ctx ends returns within 50 ms. Two
// Runs of one Election at once are refused with an error matching
// [lock.ErrInvalid], and so is a Run whose ctx is (or derives from) a
// live lead context of the same election name.
func (e *Election) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	if lead == nil {
		return fmt.Errorf("%w: leader: nil lead function", lock.ErrInvalid)
	}
	if lock.Held(ctx, Key(e.name)) { // the lock's re-entry would elect it beside the leader
		return fmt.Errorf("%w: leader: Run of election %q within a term of its own", lock.ErrInvalid, e.name)
	}
	e.mu.Lock()
	busy := e.running
	e.running = true
	e.mu.Unlock()
	if busy {
		return fmt.Errorf("%w: leader: election %q is running already", lock.ErrInvalid, e.name)
	}
	defer func() {
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
	}()
	pause := e.cfg.backoff
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		failed, err := e.term1(ctx, lead)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !failed {
			pause = e.cfg.backoff
		}
		if !e.pause(ctx, pause) {
			return ctx.Err()
		}
		if failed {
			pause = min(2*pause, e.cfg.maxBackoff)
		}
	}
}

// term1 campaigns once and, when elected, leads until lead returns (or
// ends its goroutine with runtime.Goexit: term1 resigns on the way out).
// It reports whether the campaign or the term failed: a Redis error,
// lead's error or panic, or a loss. It returns the campaign's error when
// no campaign can succeed: the locker was closed, or refuses the options.
func (e *Election) term1(ctx context.Context, lead func(ctx context.Context) error) (failed bool, err error) {
	lctx, unlock, err := e.locker.Lock(ctx, Key(e.name), e.cfg.lockOpts...)
	if errors.Is(err, lock.ErrClosed) || errors.Is(err, lock.ErrInvalid) {
		return true, fmt.Errorf("leader: campaign for %q: %w", e.name, err)
	}
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.logger.Warn("leader: campaign failed", "election", e.name, "err", err)
		}
		return true, nil
	}
	e.mu.Lock()
	e.term, e.checked = lctx, lock.Held(lctx, Key(e.name))
	e.mu.Unlock()
	var leadErr error
	defer func() {
		e.mu.Lock()
		e.term = nil
		e.mu.Unlock()
		lost := errors.Is(context.Cause(lctx), lock.ErrLost)
		if uerr := unlock(); uerr != nil && !errors.Is(uerr, lock.ErrLost) && !errors.Is(uerr, lock.ErrClosed) {
			e.cfg.logger.Warn("leader: resigning failed; the lease lapses by itself", "election", e.name, "err", uerr)
		}
		var p *panicError
		switch {
		case errors.As(leadErr, &p): // whenever it happened: a bug to fix
			e.cfg.logger.Warn("leader: lead panicked", "election", e.name, "panic", p.value, "stack", string(p.stack))
		case leadErr != nil && ctx.Err() == nil && !lost:
			e.cfg.logger.Warn("leader: lead returned an error", "election", e.name, "err", leadErr)
		}
		failed = (leadErr != nil || lost) && ctx.Err() == nil
	}()
	leadErr = call(lctx, lead)
	return false, nil
}

// panicError is a panic of lead, with the stack where it happened.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("leader: lead panicked: %v", p.value) }

// call runs lead, turning a panic into a *panicError.
func call(ctx context.Context, lead func(ctx context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return lead(ctx)
}

// IsLeader reports whether this process leads now: a term is on, its
// lead context has not ended and, for a [lock.Client]'s lock, its lease's
// validity has not run out ([lock.Held]; this also ends the lead context
// when it has, which after a freeze of the process its timer may not have
// done yet). It reads local state only, no Redis.
func (e *Election) IsLeader() bool {
	_, ok := e.current()
	return ok
}

// Token returns the fencing token of the current term, and whether this
// process leads now (see [Election.IsLeader]) with a token: a
// [lock.NewQuorum] Client's locks have none. Tokens strictly increase
// with every term, whoever leads it.
func (e *Election) Token() (uint64, bool) {
	term, ok := e.current()
	if !ok {
		return 0, false
	}
	return lock.FencingToken(term, Key(e.name))
}

// current returns the lead context of the term under way, and whether
// it leads (see IsLeader). It calls lock.Held without e.mu, which a
// loss's callbacks may need.
func (e *Election) current() (context.Context, bool) {
	e.mu.Lock()
	term, checked := e.term, e.checked
	e.mu.Unlock()
	if term == nil || term.Err() != nil {
		return nil, false
	}
	return term, !checked || lock.Held(term, Key(e.name))
}

// sleep waits d, and reports false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
