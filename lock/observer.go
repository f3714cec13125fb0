package lock

import (
	"context"
	"time"
)

// Observer sees what a [Client] does, so that tracing and metrics live
// outside the core (package otellock implements it). Attach one with
// [WithObserver].
//
// The Client calls the observer synchronously on the goroutine doing the
// work, sometimes while holding a lock's internal mutex: implementations
// must be safe for concurrent use, return quickly and must not call the
// Client.
type Observer interface {
	// Background is called once by [New] (or [NewQuorum]) with a context
	// that is never cancelled. The context it returns, which must derive
	// from ctx, is the base of every Redis call the Client makes on its
	// own rather than for a caller: the watchdog's renewals, the cleanup
	// after calls cut short and after Close, and pub/sub. Package
	// otellock marks it so that a tracing Redis client starts no trace for
	// those calls.
	Background(ctx context.Context) context.Context

	// AcquireStarted is called when [Client.Lock] or [Client.TryLock]
	// starts, with the caller's context. The context it returns is passed to
	// the call's other events; use it to carry per-call state such as a
	// span. The call's Redis commands and its wait run under it, so it must
	// derive from ctx: its cancellation and deadline end the call (a Redis
	// client's tracing hook then sees the span it carries as the parent of
	// a command sent alone; the commands of concurrent calls to one Redis
	// share a pipeline, sent under the Background context).
	AcquireStarted(ctx context.Context, a Acquire) context.Context

	// AcquireWaiting is called when a [Client.Lock] call found the key
	// held and starts to wait its turn, with the context AcquireStarted
	// returned; a.Position is its place in the wait queue. AcquireEnded
	// follows, with a.Waited set, when the wait ends whatever its outcome.
	AcquireWaiting(ctx context.Context, a Acquire)

	// AcquireEnded is called once for every AcquireStarted, with the context
	// AcquireStarted returned and a's outcome fields set. When the lock was
	// obtained, held is the lock context about to be returned; the context
	// AcquireEnded returns is handed to the caller instead and must derive
	// from held. Otherwise held is nil and the result is ignored.
	//
	// The lock context of a re-entry derives from the caller's, which is
	// the outer level's: state an observer finds with ctx.Value may be an
	// outer level's. Package otellock hides the outer level's state in a
	// level it records nothing for.
	AcquireEnded(ctx context.Context, a Acquire, held context.Context) context.Context

	// Released is called once for every obtained hold level when it ends:
	// by its [UnlockFunc], by loss of the lease, or by [Client.Close]. ctx is
	// the context AcquireEnded returned for that level, or one derived from
	// it when an Observer that wraps another returned that; the Client
	// also runs the unlock's Redis commands under it (as AcquireStarted
	// says of a call's).
	Released(ctx context.Context, r Release)

	// Renewed is called after each watchdog batch of lease renewals.
	Renewed(r Renewal)
}

// Outcome is how a [Client.Lock] or [Client.TryLock] call ended.
type Outcome int

// Outcomes of an acquisition.
const (
	OutcomeAcquired Outcome = iota // the lock is held (or re-entered)
	OutcomeBusy                    // TryLock found another owner
	OutcomeTimeout                 // the wait limit passed while the key was held
	OutcomeCanceled                // the caller's context ended the wait, or Close ended the call
	// OutcomeError: bad input, a Redis failure (also a Redis call still
	// unanswered when the context's deadline or the wait limit passed), a
	// call after Close, or a lost outer hold.
	OutcomeError
)

var outcomeNames = [...]string{"acquired", "busy", "timeout", "canceled", "error"}

// String returns the outcome's lower-case name, e.g. "acquired".
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "unknown"
	}
	return outcomeNames[o]
}

// Acquire describes one acquisition attempt. The fields after Internal
// are set only in [Observer.AcquireEnded], except Waited and Position,
// also set in [Observer.AcquireWaiting].
type Acquire struct {
	Key string
	// Name is the lock's name for telemetry, given with [WithName]; empty
	// when none was given, or when an option of the call was rejected
	// (observers then derive one from Key).
	Name string
	// Kind is KindLock, KindSemaphore or KindRead; Limit is the
	// semaphore's limit, 0 for the other kinds.
	Kind      string
	Limit     int
	Try       bool // TryLock rather than Lock (TryAcquire, TryRLock)
	Reentrant bool // the caller's context already held Key
	// Internal tells that an integration takes the lock for its own
	// bookkeeping (see [Integration.Internal]).
	Internal bool

	Outcome Outcome
	Err     error         // nil when Outcome is OutcomeAcquired
	Wait    time.Duration // from the call to its return
	Token   uint64        // fencing token when acquired
	// Waited tells that the call found the key held and waited its turn
	// ([Observer.AcquireWaiting] was called).
	Waited bool
	// Position is the call's place in the key's wait queue when it joined
	// it: 1 for the first waiter. 0 when it did not wait, or in quorum
	// mode, which has no queue.
	Position int
	// Lapses is how many times the call lost its place in the queue and
	// joined it again at the back: a hand-off or turn given to it (or to
	// another waiter of its Client, which is dropped with it) lapsed
	// unclaimed for a claim window. Each lapse kept the key free for
	// about a window. Lapses of a live process point at a pub/sub
	// connection that delivers late (see docs/operations.md) or at pauses
	// longer than the window. Set in [Observer.AcquireEnded].
	Lapses int
}

// Release describes the end of one hold level.
type Release struct {
	Key       string
	Reentrant bool
	Held      time.Duration // from acquisition to the end
	// Cause is nil for an unlock that Redis confirmed, ErrLost when the
	// lease was lost, ErrClosed when the Client was closed, or the error of
	// a failed unlock.
	Cause error
	// Loss tells why the lease was lost when Cause is ErrLost; LossNone
	// otherwise.
	Loss Loss
}

// Renewal describes one watchdog batch.
type Renewal struct {
	Leases   int           // leases the batch tried to renew
	Lost     int           // of those, found gone in Redis
	Err      error         // a Redis error of the batch, if any of its renewals failed
	Duration time.Duration // time the batch took
}

// background returns the base context of the Client's own Redis calls:
// see [Observer.Background].
func (c *config) background() context.Context {
	if c.observer == nil {
		return context.Background()
	}
	return c.observer.Background(context.Background())
}

// reportWaiting tells the observer that cl starts to wait its turn, at
// position in the queue.
func (c *Client) reportWaiting(cl *call, position int) {
	cl.a.Waited, cl.a.Position = true, position
	if o := c.cfg.observer; o != nil {
		o.AcquireWaiting(cl.rctx, cl.a)
	}
}
