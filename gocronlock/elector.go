package gocronlock

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// An Elector is a [gocron.Elector] on a [leader.Election]: between Start
// and Close it campaigns in the background, and the replica that leads
// runs every job of a scheduler made with gocron.WithDistributedElector.
// It is safe for concurrent use.
type Elector struct {
	election *leader.Election
	name     string

	mu     sync.Mutex
	cancel context.CancelFunc // ends the campaign; nil before Start and after Close
	done   chan struct{}      // closed when the campaign's goroutine returned
	term   context.Context    // the lead context of the current term; nil between terms
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector returns an Elector for the election called name on locker,
// with the election's options (lease, back-off, logger). It does not
// campaign until [Elector.Start]. It returns an error matching
// [lock.ErrInvalid] for a nil locker (or a nil pointer in it), or
// [leader.New]'s error.
func NewElector(locker lock.Locker, name string, opts ...leader.Option) (*Elector, error) {
	if isNil(locker) {
		return nil, fmt.Errorf("%w: gocronlock: nil locker", lock.ErrInvalid)
	}
	e, err := leader.New(locker, name, opts...)
	if err != nil {
		return nil, err
	}
	return &Elector{election: e, name: name}, nil
}

// Start campaigns in the background until Close: while this replica
// leads, it holds the election's lock. It returns an error matching
// [lock.ErrInvalid] when the Elector was started already.
func (e *Elector) Start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done != nil {
		return fmt.Errorf("%w: gocronlock: Elector started already", lock.ErrInvalid)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		_ = e.election.Run(ctx, func(ctx context.Context) error {
			e.mu.Lock()
			e.term = ctx
			e.mu.Unlock()
			defer func() {
				e.mu.Lock()
				e.term = nil
				e.mu.Unlock()
			}()
			<-ctx.Done() // lead until leadership is lost or Close
			return nil
		})
	}(e.done)
	return nil
}

// Close ends the campaign: a leader resigns, so that another replica
// leads at once, not after a lease. It returns when the campaign's
// goroutine has, and nil; later calls do nothing.
func (e *Elector) Close() error {
	e.mu.Lock()
	cancel, done := e.cancel, e.done
	e.cancel = nil
	e.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}

// IsLeader returns nil while this replica leads, [ErrNotLeader]
// otherwise. It reads local state only: no Redis call. A run that starts
// while this replica leads goes on if leadership is lost meanwhile,
// unless its function, wrapped with [Elector.Func], heeds its context;
// fence its writes with [Elector.Token]. IsLeader, Token and Func agree:
// they read the same term.
func (e *Elector) IsLeader(context.Context) error {
	if e.lead() == nil {
		return ErrNotLeader
	}
	return nil
}

// Token returns the fencing token of the current term, and whether this
// replica leads (see [leader.Election.Token]).
func (e *Elector) Token() (uint64, bool) {
	term := e.lead()
	if term == nil {
		return 0, false
	}
	return lock.FencingToken(term, leader.Key(e.name))
}

// lead returns the lead context of the current term while it lasts, nil
// otherwise.
func (e *Elector) lead() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term == nil || e.term.Err() != nil {
		return nil
	}
	return e.term
}

// Func wraps a job function for gocron.NewTask: fn runs with a context
// that ends when gocron's job context does or when this replica stops
// leading (cause [lock.ErrLost] when leadership is lost, context.Canceled
// on Close). When this replica does not lead as the run starts, the
// function returns [ErrNotLeader] without running fn.
func (e *Elector) Func(fn func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		term := e.lead()
		if term == nil {
			return ErrNotLeader
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(term, func() { cancel(context.Cause(term)) })
		defer stop()
		return fn(ctx)
	}
}
