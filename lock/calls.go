package lock

import (
	"context"
	"errors"
	"time"
)

// cutOff reports whether err is that of a Redis call that ctx, the call's
// context, cut off: not an answer, nor what ended a hold.
func cutOff(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && !errors.Is(err, ErrNotObtained) && err != ErrClosed && err != ErrLost
}

// errWaitLimit is the cause of a call context whose wait limit passed.
var errWaitLimit = errors.New("lock: wait limit passed")

// callContext returns the context of a Lock or TryLock call's Redis calls
// and wait: derived from the observer's context, it ends when the caller's
// does, when the wait limit set with [WithMaxWait] passes (cause
// errWaitLimit) and at Close (cause ErrClosed), and when endCall ends the
// call.
//
// Without an observer it derives from the caller's context as a level's
// does, and on the inline node no command of the call outlives it: the
// level the call obtains may keep it (see levelContext).
func (c *Client) callContext(cl *call, lc lockConfig) context.Context {
	cl.keepable = c.cfg.observer == nil && c.be.nodes().inline != nil
	return c.callContextOn(cl, lc, cl.rctx)
}

// callContextOn is callContext over base, which derives from cl.rctx.
func (c *Client) callContextOn(cl *call, lc lockConfig, base context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(base)
	cl.cctx, cl.cancel = ctx, cancel
	c.callsMu.Lock()
	if c.callsClosed {
		cancel(ErrClosed)
	} else {
		c.calls[ctx] = cancel
	}
	c.callsMu.Unlock()
	if lc.waitSet {
		ctx, cl.cancelLimit = context.WithDeadlineCause(ctx, cl.start.Add(lc.maxWait), errWaitLimit)
	}
	return ctx
}

// endCall cancels the context of a call that callContext made, unless
// its level kept it. The last call to end after Close wakes the janitor,
// which Close waits for: the call handed it what the call owes Redis
// (leaving the queue) first.
func (c *Client) endCall(cl *call) {
	if cl.cancelLimit != nil {
		cl.cancelLimit()
	}
	if cl.kept {
		return
	}
	c.callsMu.Lock()
	delete(c.calls, cl.cctx)
	last := c.callsClosed && len(c.calls) == 0
	c.callsMu.Unlock()
	if last {
		c.jan.Kick()
	}
	cl.cancel(nil)
}

// levelContext returns the context of the level cl obtains, derived from
// the caller's, and its cancel function: the call's own context when it
// is keepable (see callContext) and Close has not begun, which then is
// the level's alone (neither endCall nor Close ends it as the call's),
// otherwise a new one.
func (c *Client) levelContext(cl *call) (context.Context, context.CancelCauseFunc) {
	if cl.keepable && !cl.kept {
		c.callsMu.Lock()
		if !c.callsClosed {
			delete(c.calls, cl.cctx)
			cl.kept = true
		}
		c.callsMu.Unlock()
		if cl.kept {
			return cl.cctx, cl.cancel
		}
	}
	return context.WithCancelCause(cl.ctx)
}

// closeCalls cancels the context of every call under way with ErrClosed,
// and of every unlock waiting for Redis, and of any that starts later.
func (c *Client) closeCalls() {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	c.callsClosed = true
	for _, cancel := range c.calls {
		cancel(ErrClosed)
	}
	for _, cancel := range c.unlocks {
		cancel()
	}
}

// cutAtClose has Close cancel ctx, an unlock's context, until uncut:
// at once if Close has begun.
func (c *Client) cutAtClose(ctx context.Context, cancel context.CancelFunc) {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	if c.callsClosed {
		cancel()
		return
	}
	c.unlocks[ctx] = cancel
}

// uncut ends what cutAtClose began.
func (c *Client) uncut(ctx context.Context) {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	delete(c.unlocks, ctx)
}

// callsUnderWay reports whether a Lock or TryLock call that callContext
// registered has yet to end.
func (c *Client) callsUnderWay() bool {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	return len(c.calls) > 0
}

// ended is the error of a call whose context ended: what ended it, as a
// [NotObtainedError] joined with the caller's ctx.Err() (with
// context.DeadlineExceeded for the wait limit when a Redis call was cut
// off), or ErrClosed. remaining is what the last attempt said of the
// holder's lease; cutOff tells that a Redis call was under way,
// unanswered: when a deadline (the caller's or the wait limit) rather than
// a cancellation cut it off, Redis did not answer in time.
func ended(ctx context.Context, key string, remaining time.Duration, cutOff bool) error {
	e := &NotObtainedError{Key: key, RemainingLease: remaining}
	switch context.Cause(ctx) {
	case ErrClosed:
		return ErrClosed
	case errWaitLimit:
		e.timedOut = true
		if !cutOff {
			return e
		}
	}
	err := ctx.Err()
	e.unanswered = cutOff && err == context.DeadlineExceeded
	return errors.Join(e, err)
}
