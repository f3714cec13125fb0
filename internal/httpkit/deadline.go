package httpkit

import (
	"context"
	"time"
)

// noDeadline is a request's context without its deadline, keeping its
// values and its cancellation (which comes at the deadline anyway). The
// lock is taken with it, so that the release after the chain, on a
// goroutine of its own, is bounded by the lock Client's release timeout
// (1 s) rather than by a deadline a middleware set for the request,
// which could keep that goroutine on a stalled Redis for as long.
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// withDeadline is the handler's lock context reporting the request's
// deadline d again; it is cancelled at d through the request's context.
type withDeadline struct {
	context.Context
	d time.Time
}

func (w withDeadline) Deadline() (time.Time, bool) { return w.d, true }

// handlerContext is the handler's context: lockCtx with the deadline of
// req, the request's context, if it has one.
func handlerContext(lockCtx, req context.Context) context.Context {
	if d, ok := req.Deadline(); ok {
		return withDeadline{lockCtx, d}
	}
	return lockCtx
}
