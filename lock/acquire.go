package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lock blocks until key is held, ctx is done, or the wait limit set with
// [WithMaxWait] passes.
//
// If ctx already holds key (it was returned by Lock or TryLock of this
// Client for key, or derives from such a context), Lock re-enters: the hold
// count in Redis goes up and nothing waits; the re-entry keeps the
// outermost acquisition's lease, so its lease options are only validated.
// Re-entry does not depend on ctx's cancellation: while the hold is live,
// a cancelled ctx that holds key re-enters too (the new level's context
// derives from ctx, so it is done as well, with ctx's cause), and the
// Redis call runs until ctx's deadline + 50 ms or, without a deadline,
// for up to 1 s.
// Goroutines started with a held context act for the holder. Any other
// context contends, even one that holds other keys or shares a parent with
// the holder.
//
// While waiting, Lock does not poll: it wakes when its turn is announced
// over pub/sub or when the holder's lease would end, whichever comes
// first. Waiters get the key in arrival order across all Clients (see
// "Waiting" in the package documentation); one that stops waiting leaves
// the queue with one more Redis call, which Lock waits for up to 50 ms
// (the janitor goes on with it in the background).
//
// When ctx ends while the key is being taken (its turn came as ctx was
// cancelled), Lock returns the error below and lets the key go to the
// next waiter, in the background if Redis is slow: a success is never a
// lock context that was done before Lock obtained the key (it is done only
// if ctx ended after that, as it may end just after Lock returns).
//
// On success the returned context derives from ctx, carries the ownership
// and is cancelled with cause [ErrLost] if the lease is lost, [ErrClosed]
// at Close, and when unlock is called; the returned [UnlockFunc] releases
// this one hold level.
//
// Errors: [ErrNotObtained] (as a [*NotObtainedError]) when the wait limit
// passed, joined with ctx.Err() when ctx ended the wait; [ErrInvalid] for an
// empty or oversized key or a bad option; [ErrClosed] after Close;
// [ErrLost] when re-entering a hold whose lease is gone; otherwise the
// Redis error.
func (c *Client) Lock(ctx context.Context, key string, opts ...LockOption) (context.Context, UnlockFunc, error) {
	return c.acquireKind(ctx, key, false, shareNone, 0, opts)
}

// TryLock makes one attempt: it returns [ErrNotObtained] (as a
// [*NotObtainedError] carrying the holder's remaining lease, or the time
// left of a queued waiter's turn) at once if another owner holds key or
// waiters are queued for it. It never joins the wait queue. Otherwise it
// behaves as [Client.Lock], re-entry included; [WithMaxWait] bounds the
// attempt.
//
// Because Lock callers are served first come, first served, a key in
// steady Lock demand is never free for TryLock: each release hands the
// key to the next queued waiter, so TryLock finds it held (or, after a
// waiter missed its turn, kept for the next one: the error's Reserved
// field is then set).
// Where several callers of one key must all make progress, use Lock with
// [WithMaxWait] rather than TryLock in a loop.
func (c *Client) TryLock(ctx context.Context, key string, opts ...LockOption) (context.Context, UnlockFunc, error) {
	return c.acquireKind(ctx, key, true, shareNone, 0, opts)
}

// call is one Lock or TryLock call under way.
type call struct {
	ctx   context.Context // the caller's; lock contexts derive from it
	rctx  context.Context // for Redis calls and waiting: the observer's, or ctx
	start time.Time
	a     Acquire // what the observer is told

	// The call's context (see callContext) before its wait limit, which
	// Close ends through the Client's registry, and its cancel functions.
	cctx        context.Context
	cancel      context.CancelCauseFunc
	cancelLimit context.CancelFunc // nil without a wait limit
	// keepable tells that cctx may become the context of the level the
	// call obtains, which kept tells (see levelContext).
	keepable, kept bool
}

// acquireKind takes key as a lock or, for another kind, a shared hold
// (limit: a semaphore's).
func (c *Client) acquireKind(ctx context.Context, key string, try bool, kind shareKind, limit int, opts []LockOption) (context.Context, UnlockFunc, error) {
	outer := findLevel(ctx, c, key)
	lc, optErr := c.cfg.lockConfig(opts) // first: observers get the name
	if optErr != nil {
		lc.name = "" // a rejected name is never recorded
	}
	if optErr == nil {
		optErr = c.checkShare(kind, limit)
	}
	if optErr == nil && outer != nil {
		optErr = reentryKind(key, outer.h, kind, limit)
	}
	lc.kind, lc.limit = kind, limit
	cl := call{ctx: ctx, rctx: ctx, start: time.Now(), a: Acquire{Key: key, Name: lc.name, Kind: kind.Kind(), Limit: limit, Try: try, Reentrant: outer != nil, Internal: lc.internal}}
	obs := c.cfg.observer
	if obs != nil {
		cl.rctx = obs.AcquireStarted(ctx, cl.a)
	}
	open := !c.isClosed()
	lvl, err := c.obtain(&cl, lc, optErr, outer)
	if err != nil {
		if obs != nil {
			cl.a.Wait, cl.a.Err, cl.a.Outcome = time.Since(cl.start), err, outcomeOf(err, open)
			obs.AcquireEnded(cl.rctx, cl.a, nil)
		}
		return nil, nil, err
	}
	return lvl.ctx, lvl.unlock, nil
}

// outcomeOf classifies the error of a call; open tells that the Client
// was not closed when the call began. Contention (busy, timeout) and a
// caller giving up or a graceful Close (canceled) are not failures; a Redis
// call left unanswered when the call's context ended is one: a stalled
// Redis must not look like a held key.
func outcomeOf(err error, open bool) Outcome {
	var e *NotObtainedError
	switch {
	case err == nil:
		return OutcomeAcquired
	case err == ErrClosed && open: // Close ended the call under way
		return OutcomeCanceled
	case !errors.Is(err, ErrNotObtained):
		return OutcomeError
	case errors.As(err, &e) && e.unanswered:
		return OutcomeError
	case e != nil && e.timedOut:
		return OutcomeTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	}
	return OutcomeBusy
}

// obtain validates the call, then re-enters outer or takes the key afresh.
func (c *Client) obtain(cl *call, lc lockConfig, optErr error, outer *level) (*level, error) {
	if err := checkKey(cl.a.Key); err != nil {
		return nil, err
	}
	if optErr != nil {
		return nil, optErr
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	return c.take(cl, lc, outer)
}

func (c *Client) take(cl *call, lc lockConfig, outer *level) (*level, error) {
	if outer != nil {
		lvl, err := c.reenter(cl, lc, outer)
		if err != errReleased {
			return lvl, err
		}
		cl.a.Reentrant = false // unlocked meanwhile: ctx no longer holds the key
	}
	ctx := c.callContext(cl, lc)
	defer c.endCall(cl)
	if err := cl.ctx.Err(); err != nil {
		return nil, errors.Join(&NotObtainedError{Key: cl.a.Key}, err)
	}
	h := c.newHold(cl.ctx, cl.a.Key, lc)
	// A waiter joins this process's queue of the key before its first
	// attempt where the key is subscribed to already, so no turn announced
	// after that attempt can miss it.
	var q *queue
	var me *waiter
	confirmed := false
	if !cl.a.Try {
		q, me, confirmed = c.wt.join(h, false)
	}
	res, err := h.attempt(ctx, !cl.a.Try)
	if !cl.a.Try && !res.ok && err == nil {
		if q == nil {
			// Joined after the attempt that queued the owner in Redis: a
			// hand-off or turn announced in between reached no waiter
			// here (one by a release of this Client is told only by its
			// reply), so the waiter tries again once the subscription is
			// confirmed, at once if it is already (confirmed stays false).
			q, me, _ = c.wt.join(h, true)
		}
		c.reportWaiting(cl, res.position)
		res, err = c.wt.wait(ctx, h, q, me, confirmed, res)
		cl.a.Lapses = me.lapses
	}
	if q != nil { // first, so that what leaving the queue in Redis tells this process reaches its next waiter
		c.wt.leave(q, me)
	}
	if !res.ok && (!cl.a.Try || h.mayHold) {
		// The owner is given up for good: out of the queue, passing on its
		// turn, and released where an attempt may have taken the key.
		c.abandon(h, h.mayHold, leaveWait)
	}
	switch {
	case cutOff(ctx, err):
		return nil, ended(ctx, cl.a.Key, 0, true)
	case err != nil:
		return nil, err
	case !res.ok:
		return nil, &NotObtainedError{Key: cl.a.Key, RemainingLease: res.remaining, Reserved: res.reserved}
	}
	lvl, err := h.start(cl, res)
	if err == errGaveUp {
		// The key goes on to the next waiter, or is freed, in the
		// background if Redis is slow.
		c.abandon(h, true, leaveWait)
		return nil, errors.Join(&NotObtainedError{Key: cl.a.Key}, cl.ctx.Err())
	}
	return lvl, err
}

// reenter re-enters outer's hold. The caller's cancellation does not
// matter: a context that holds the key re-enters while the hold is live,
// also once it is cancelled (a request whose client went away, held with
// [WithHoldUntilUnlock]). Its Redis call is bounded as an unlock's is (see
// unlockContext), by the wait limit, and by Close.
func (c *Client) reenter(cl *call, lc lockConfig, outer *level) (*level, error) {
	base, cancel := unlockContext(cl.rctx)
	defer cancel()
	ctx := c.callContextOn(cl, lc, base)
	defer c.endCall(cl)
	lvl, err := outer.h.enter(ctx, cl, outer)
	if cutOff(ctx, err) && err != errReleased {
		err = ended(ctx, cl.a.Key, 0, true)
	}
	return lvl, err
}

// start makes a successful attempt the hold's first level and hands the
// lease to the watchdog.
func (h *hold) start(cl *call, res attemptResult) (*level, error) {
	h.token = res.token
	h.mu.Lock()
	defer h.mu.Unlock()
	h.validUntil = res.sent.Add(res.ttl - h.c.cfg.driftFor(res.ttl))
	h.handed.Store(res.handed)
	if !h.c.wd.add(h, res.sent, h.validUntil) {
		h.end = ErrClosed
		h.c.abandon(h, true, 0) // released before Close returns, if Redis answers
		return nil, ErrClosed
	}
	l := h.newLevelLocked(cl)
	if l.held.Err() != nil {
		// The caller's context ended while the key was being taken (a
		// wake-up and the cancellation came together, or the cancellation
		// came while the winning command ran). Checked on the level's own
		// context once it is made and reported, as late as can be, so a
		// success never hands back a context that was done before: the
		// level ends at once, as if unlocked, and the caller lets the key
		// go.
		h.endLevelsLocked(l, nil)
		h.c.reportRelease(l, context.Cause(l.held))
		h.endLocked(errDone)
		l.cancel(errUnlocked)
		return nil, errGaveUp
	}
	return l, nil
}

// errGaveUp tells that the caller's context ended while its key was
// being taken; the caller lets the key go (see take).
var errGaveUp = errors.New("lock: caller gave up")

// enter re-enters the hold through via, the level cl's context carries:
// one more hold count in Redis. It returns the cause when the hold has
// ended, and errReleased when via was unlocked meanwhile.
func (h *hold) enter(ctx context.Context, cl *call, via *level) (*level, error) {
	if !h.lockOps(ctx) {
		return nil, ended(ctx, h.key, 0, true)
	}
	defer h.unlockOps()
	h.mu.Lock()
	h.checkValidityLocked()
	end, unlocked, n := h.end, via.unlocked, len(h.levels)+1
	h.mu.Unlock()
	switch {
	case unlocked:
		return nil, errReleased
	case end != nil:
		return nil, end
	}
	be := h.c.be
	set := be.nodes()
	entered := func(v []int64) bool { return v[0] == int64(n) }
	var room [1]nodeResult[[]int64]
	rs := fanOutWith(set, ctx, be.timeout(h.lease), acquireOn, acquireArgs{h: h, n: n}, entered, room[:])
	v := tally(rs, entered)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case set.lost(v):
		h.loseLocked(LossKeyGone)
		return nil, ErrLost
	case !set.won(v):
		return nil, fmt.Errorf("lock: re-enter %q: %w", h.key, be.failure(v))
	case h.end != nil: // lost or closed while the command ran
		return nil, h.end
	}
	return h.newLevelLocked(cl), nil
}
