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
	// AcquireStarted is called when [Client.Lock] or [Client.TryLock]
	// starts, with the caller's context. The context it returns is passed to
	// AcquireEnded; use it to carry per-call state such as a span. It is not
	// used for Redis calls.
	AcquireStarted(ctx context.Context, a Acquire) context.Context

	// AcquireEnded is called once for every AcquireStarted, with the context
	// AcquireStarted returned and a's outcome fields set. When the lock was
	// obtained, held is the lock context about to be returned; the context
	// AcquireEnded returns is handed to the caller instead and must derive
	// from held. Otherwise held is nil and the result is ignored.
	AcquireEnded(ctx context.Context, a Acquire, held context.Context) context.Context

	// Released is called once for every obtained hold level when it ends:
	// by its [UnlockFunc], by loss of the lease, or by [Client.Close]. ctx is
	// the context AcquireEnded returned for that level.
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
	OutcomeTimeout                 // the wait limit passed
	OutcomeCanceled                // the caller's context ended the wait
	OutcomeError                   // bad input, Redis failure, closed client or lost outer hold
)

var outcomeNames = [...]string{"acquired", "busy", "timeout", "canceled", "error"}

// String returns the outcome's lower-case name, e.g. "acquired".
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "unknown"
	}
	return outcomeNames[o]
}

// Acquire describes one acquisition attempt. The fields after Reentrant are
// set only in [Observer.AcquireEnded].
type Acquire struct {
	Key       string
	Try       bool // TryLock rather than Lock
	Reentrant bool // the caller's context already held Key

	Outcome Outcome
	Err     error         // nil when Outcome is OutcomeAcquired
	Wait    time.Duration // from the call to its return
	Token   uint64        // fencing token when acquired
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
}

// Renewal describes one watchdog batch.
type Renewal struct {
	Leases   int           // leases the batch tried to renew
	Lost     int           // of those, found gone in Redis
	Err      error         // a Redis error of the batch, if any of its renewals failed
	Duration time.Duration // time the batch took
}
