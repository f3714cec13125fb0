package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// errDone ends a hold whose last level was unlocked.
	errDone = errors.New("lock: released")

	// errReleased tells a re-entry that the level its context carried was
	// unlocked meanwhile: the context no longer holds the key.
	errReleased = errors.New("lock: level unlocked")

	// errOuterUnlocked is the cause of the levels entered through a level
	// that was unlocked before them.
	errOuterUnlocked = fmt.Errorf("%w: a hold level it was entered through was unlocked first", ErrNotHeld)

	// errUnlocked is the cause of a level's context once its unlock ran:
	// the lock was let go, which the caller must not confuse with its own
	// context.Canceled (the caller went away, the lock still held).
	errUnlocked = fmt.Errorf("%w: unlocked", ErrNotHeld)
)

// A hold is one owner's possession of one key: the outermost acquisition
// and every re-entry into it. Its hold levels are the live acquisitions;
// their number is the hold count kept in Redis.
type hold struct {
	c      *Client
	key    string
	rk     redisKeys
	owner  string
	lease  time.Duration
	fixed  bool            // no watchdog
	parent context.Context // the outermost caller's; renewal stops when it is done
	token  uint64
	// Script arguments, boxed once: the owner, the lease and the linger
	// time in ms (see linger).
	ownerArg, leaseArg, lingerArg any
	handed                        atomic.Bool // the key was handed over, with the claim window's TTL, and the holder has yet to confirm
	// releasing is set before the owner's final release is sent (see
	// lateGrant).
	releasing atomic.Bool

	// mayHold tells that an attempt that did not succeed may have taken
	// the key on some node (a minority, too late, or cut off): if the call
	// gives up, the janitor must release the owner. Only the acquiring
	// goroutine uses it.
	mayHold bool

	ops        chan struct{} // capacity 1: serialises the hold count's changes in Redis
	mu         sync.Mutex    // guards what follows; never held over a Redis call
	levels     []*level      // live levels, outermost first
	end        error         // nil while held; then errDone, ErrLost or ErrClosed
	loss       Loss          // why, when end is ErrLost
	validUntil time.Time     // the watchdog ends the hold with ErrLost then
}

// A level is one successful Lock or TryLock call: one hold count.
type level struct {
	h         *hold
	prev      *level          // the level the caller's context carried, if any
	held      context.Context // carries this level (&carrier); cancelled when it ends
	ctx       context.Context // returned to the caller (held, or the observer's)
	cancel    context.CancelCauseFunc
	start     time.Time
	reentrant bool
	unlocked  bool // guarded by h.mu; also set when an outer level was unlocked first
	carrier   carrier
}

type levelKey struct{}

// A carrier is a level's context: the level's cancellable context, with
// the level as the value of levelKey{}. Kept in the level, it costs no
// allocation of its own.
type carrier struct {
	context.Context
	l *level
}

func (c *carrier) Value(key any) any {
	if key == (levelKey{}) {
		return c.l
	}
	return c.Context.Value(key)
}

type attemptResult struct {
	ok        bool
	token     uint64
	remaining time.Duration // holder's lease, or the turn's time left, when !ok
	reserved  bool          // !ok because the key is free but kept for a queued waiter
	sent      time.Time     // when the command was sent (ok: a moment before Redis set the TTL)
	ttl       time.Duration // ok: the TTL Redis set, the lease or the claim window of a hand-off
	redisAt   int64         // !ok, queued: Redis's time (ms) when it ran the attempt; 0 if unknown
	answered  time.Time     // !ok, queued: when its reply came (Redis ran it between sent and this)
	handed    bool          // ok by a hand-off the holder has yet to confirm
	position  int           // !ok, queued: place in the wait queue when it joined it, 1 first
}

func (c *Client) newHold(parent context.Context, key string, lc lockConfig) *hold {
	if lc.untilUnlock {
		parent = context.WithoutCancel(parent) // renewed until unlock
	}
	owner := c.newOwner(lc.internal)
	h := &hold{
		c:         c,
		key:       key,
		rk:        c.keys.get(key),
		owner:     owner,
		ownerArg:  owner,
		leaseArg:  c.leaseArg,
		lingerArg: c.lingerArg,
		lease:     lc.lease,
		fixed:     lc.fixed,
		parent:    parent,
		ops:       make(chan struct{}, 1),
	}
	if lc.lease != c.cfg.lease {
		h.leaseArg, h.lingerArg = leaseArgs(lc.lease)
	}
	return h
}

// leaseArgs returns a lease and its linger time in ms, boxed for script
// calls: how long Redis keeps the hash of the key after the last release,
// the lease, at most a second.
func leaseArgs(lease time.Duration) (leaseArg, lingerArg any) {
	return lease.Milliseconds(), min(lease, time.Second).Milliseconds()
}

// lockOps waits until the hold count is this caller's to change in Redis,
// or until ctx is done (a command of the hold stuck in a stalled Redis
// must not hold other callers past their deadlines); it reports which.
func (h *hold) lockOps(ctx context.Context) bool {
	select {
	case h.ops <- struct{}{}:
		return true
	default:
	}
	select {
	case h.ops <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (h *hold) unlockOps() { <-h.ops }

// validity is how long after sending a command that set the lease the
// holder may count on it: the lease less the drift allowance.
func (h *hold) validity() time.Duration {
	return h.lease - h.c.cfg.driftFor(h.lease)
}

// attempt tries once to take the key for a new owner; with wait, a failed
// attempt joins the key's wait queue.
func (h *hold) attempt(ctx context.Context, wait bool) (attemptResult, error) {
	c := h.c
	h.releasing.Store(false) // a minority released after a failed attempt is taken again
	sent := time.Now()
	rs := fanOutScripts(c, ctx, c.callTimeout(h.lease), func(ctx context.Context, nd *node) ([]int64, error) {
		v, err := nd.acquire(ctx, h, 1, wait)
		if err == nil && v[0] == 1 {
			h.lateGrant(ctx, nd)
		}
		return v, err
	}, func(v []int64) bool { return v[0] == 1 })
	answered := time.Now()
	var v votes
	var token uint64
	var heldFor []time.Duration
	var redisAt int64
	var position int
	taken := false    // some node may have given us the key
	reserved := false // the key was free but kept for a queued waiter
	for _, r := range rs {
		switch {
		case r.err != nil:
			v.errs = append(v.errs, r.err)
			taken = taken || mayHaveRun(r.err)
		case r.val[0] == 1:
			v.yes++
			token = uint64(r.val[1])
			taken = true
		default:
			reserved = reserved || r.val[0] == -2
			heldFor = append(heldFor, time.Duration(r.val[1])*time.Millisecond)
			if len(r.val) == 4 {
				redisAt, position = r.val[2], int(r.val[3])
			}
		}
	}
	if c.won(v) && time.Since(sent) < h.validity() {
		if len(c.nodes) > 1 {
			token = 0 // see NewQuorum
		}
		return attemptResult{ok: true, token: token, sent: sent, ttl: h.lease}, nil
	}
	if taken {
		h.mayHold = true
		if ctx.Err() == nil {
			_ = h.release(ctx, 0) // a minority or too late: let others in now
		}
	}
	if len(v.errs) > 0 && len(heldFor)+v.yes < c.quorum {
		return attemptResult{}, fmt.Errorf("lock: acquire %q: %w", h.key, c.failure(v))
	}
	return attemptResult{remaining: c.retryDelay(heldFor, c.cfg.nodeTimeoutFor(h.lease)), reserved: reserved, sent: sent, redisAt: redisAt, answered: answered, position: position}, nil
}

// lateGrant releases the key on nd, which just gave it to h's owner, when
// the owner's final release was already under way: in quorum mode a call
// returns at the majority's answer and the other nodes' commands go on in
// the background, so the release, sent on another connection, may have
// reached nd first; nd would then keep the key for a whole lease, for an
// owner long gone, and with two such nodes no one could get a majority.
func (h *hold) lateGrant(ctx context.Context, nd *node) {
	if len(h.c.nodes) > 1 && h.releasing.Load() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		_, _ = nd.release(rctx, h, 0)
	}
}

// handedOff turns a hand-off of the key to h's owner into a successful
// attempt, if it can be counted on: last is the owner's last attempt,
// which Redis ran at last.redisAt, before the hand-off at g.at. The TTL
// Redis set then (the claim window; no more than the lease is counted on)
// counts from last.sent plus the time
// between the two on Redis's clock, less the drift allowance over that
// time: a moment that precedes the hand-off. It reports false when the
// holder must confirm with an attempt instead (which sets its lease): a
// fixed lease, no usable time, or less than half the window left.
func (h *hold) handedOff(g handOff, last attemptResult) (attemptResult, bool) {
	if h.fixed || h.c.nodes[0].acks > 0 || last.redisAt == 0 || g.at < last.redisAt {
		return attemptResult{}, false
	}
	gap := time.Duration(g.at-last.redisAt) * time.Millisecond
	start := last.sent.Add(gap - gap/100)
	// Count on no more than the lease: the first renewal sets the TTL to it.
	ttl := min(time.Duration(h.c.claim)*time.Millisecond, h.lease)
	if time.Until(start.Add(ttl-h.c.cfg.driftFor(ttl))) < ttl/2 {
		return attemptResult{}, false
	}
	return attemptResult{ok: true, token: uint64(g.token), sent: start, ttl: ttl, handed: true}, true
}

// mayHaveRun reports whether a command that failed with err may still have
// run in Redis: not when Redis answered with an error, the client was
// closed, or no connection could be made.
func mayHaveRun(err error) bool {
	var re redis.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, redis.ErrClosed), errors.As(err, &oe) && oe.Op == "dial":
		return false
	case errors.As(err, &re):
		return false
	}
	return true
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
		h.c.jan.abandon(h, true, 0) // released before Close returns, if Redis answers
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
	c := h.c
	rs := fanOutScripts(c, ctx, c.callTimeout(h.lease), func(ctx context.Context, nd *node) ([]int64, error) {
		return nd.acquire(ctx, h, n, false)
	}, func(v []int64) bool { return v[0] == int64(n) })
	var v votes
	for _, r := range rs {
		switch {
		case r.err != nil:
			v.errs = append(v.errs, r.err)
		case r.val[0] == int64(n):
			v.yes++
		default:
			v.no++
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case c.lost(v):
		h.loseLocked(LossKeyGone)
		return nil, ErrLost
	case !c.won(v):
		return nil, fmt.Errorf("lock: re-enter %q: %w", h.key, c.failure(v))
	case h.end != nil: // lost or closed while the command ran
		return nil, h.end
	}
	return h.newLevelLocked(cl), nil
}

// checkValidityLocked ends the hold with ErrLost when its validity has run
// out, in case the watchdog has not ended it yet.
func (h *hold) checkValidityLocked() {
	if h.end == nil && !time.Now().Before(h.validUntil) {
		h.loseLocked(LossNotRenewed)
	}
}

// newLevelLocked adds a level for cl and tells the observer, before any
// loss or release of the hold can be reported for it.
func (h *hold) newLevelLocked(cl *call) *level {
	cctx, cancel := context.WithCancelCause(cl.ctx)
	l := &level{h: h, cancel: cancel, start: time.Now(), reentrant: len(h.levels) > 0}
	l.prev, _ = cl.ctx.Value(levelKey{}).(*level)
	l.carrier = carrier{Context: cctx, l: l}
	l.held = &l.carrier
	l.ctx = l.held
	if o := h.c.cfg.observer; o != nil {
		cl.a.Wait, cl.a.Outcome, cl.a.Token = time.Since(cl.start), OutcomeAcquired, h.token
		l.ctx = o.AcquireEnded(cl.rctx, cl.a, l.held)
	}
	h.levels = append(h.levels, l)
	return l
}

// unlock releases one level, and the levels entered through it; it is the
// level's UnlockFunc.
func (l *level) unlock() error {
	h := l.h
	h.mu.Lock()
	unlocked := l.unlocked
	h.mu.Unlock()
	if unlocked {
		return l.notHeld()
	}
	ctx, cancel := unlockContext(l.ctx)
	defer cancel()
	// Close cuts an unlock still waiting for Redis: it returns ErrClosed,
	// and what the release still owes Redis goes on as Close's cleanups
	// do, so no caller's goroutine waits on Redis after Close.
	defer context.AfterFunc(h.c.life, cancel)()
	if !h.lockOps(ctx) {
		return l.abandon(ctx)
	}
	defer h.unlockOps()
	h.mu.Lock()
	if l.unlocked {
		h.mu.Unlock()
		return l.notHeld()
	}
	ended := h.endLevelsLocked(l, make([]*level, 0, 1))
	n := len(h.levels)
	reported := h.end != nil // the loss or Close that ended the hold told the observer
	h.checkValidityLocked()
	end := h.end
	if n == 0 {
		h.endLocked(errDone) // no more renewals, whatever Redis answers
	}
	h.mu.Unlock()

	var err error
	switch end {
	case nil:
		err = h.unlockRelease(ctx, n)
	case ErrLost:
		if n == 0 {
			_ = h.unlockRelease(ctx, 0) // lets others in sooner if the key is still ours
		}
		err = ErrLost
	case ErrClosed:
		err = ErrClosed // Close released the key, or its lease lapses
	}
	h.mu.Lock()
	if err == ErrLost && h.end == ErrClosed {
		// Close ended the hold while the release was on its way, and
		// released the key first: not a loss.
		err = ErrClosed
	}
	if err == ErrLost {
		h.loseLocked(LossKeyGone) // for the levels still held
	}
	if !reported {
		for _, x := range ended {
			h.c.reportRelease(x, err)
		}
	}
	h.mu.Unlock()
	for _, x := range ended[1:] {
		x.cancel(errOuterUnlocked) // before l, from whose context theirs derive
	}
	switch err {
	case ErrLost, ErrClosed:
		l.cancel(err) // the lock was gone, or Close ended it, before this unlock
	default:
		l.cancel(errUnlocked)
	}
	return err
}

// notHeld is the error of an unlock of l, which is unlocked already,
// maybe by an unlock still under way (a second call of its UnlockFunc, or
// the unlock of a level it was entered through): it returns once l's
// context is cancelled, which that unlock does when it returns, bounded
// as it is (see unlockContext), so that after any UnlockFunc returned the
// level's context is done, with a cause matching ErrNotHeld or ErrLost.
func (l *level) notHeld() error {
	<-l.held.Done()
	return ErrNotHeld
}

// endLevelsLocked marks l and the levels entered through it unlocked,
// takes them out of the hold and returns them, l first, appended to
// ended (room the caller has for them).
func (h *hold) endLevelsLocked(l *level, ended []*level) []*level {
	ended = h.innerLocked(l, ended)
	for _, x := range ended {
		x.unlocked = true
	}
	h.levels = slices.DeleteFunc(h.levels, func(x *level) bool { return slices.Contains(ended, x) })
	return ended
}

// innerLocked appends to ended l and, innermost last, the live levels
// entered through it: those whose chain of carried levels leads to l.
func (h *hold) innerLocked(l *level, ended []*level) []*level {
	ended = append(ended, l)
	for _, x := range h.levels {
		for p := x.prev; p != nil; p = p.prev {
			if p == l {
				ended = append(ended, x)
				break
			}
		}
	}
	return ended
}

// release moves the owner's hold count in Redis to n, deleting the key and
// announcing the release at 0, and returns ErrLost when the owner no longer
// held the key. It waits for Redis until ctx is done.
func (h *hold) release(ctx context.Context, n int) error {
	c := h.c
	v := h.releaseVotes(ctx, n)
	if n == 0 && len(c.nodes) > 1 && v.yes > 0 {
		c.wt.letGo(h)
	}
	switch {
	case c.won(v):
		return nil
	case c.lost(v):
		return ErrLost
	}
	return fmt.Errorf("lock: release %q: %w", h.key, c.failure(v))
}

// releaseVotes runs release.lua on every node and tallies the answers.
// With one node, a final release wakes this process's waiter the key was
// handed to as soon as Redis answers (see releaseReplied).
func (h *hold) releaseVotes(ctx context.Context, n int) votes {
	c := h.c
	if n == 0 {
		h.releasing.Store(true)
	}
	rs := fanOutScripts(c, ctx, c.callTimeout(h.lease), func(ctx context.Context, nd *node) (bool, error) {
		if d, ok := ctx.Deadline(); ok && len(c.nodes) > 1 && !c.isClosed() {
			// Not cut off when the caller returns at the majority's
			// answer, only at the deadline or Close: a node slower to
			// start would keep the key for a whole lease
			// (TestQuorumReleaseReachesSlowNode).
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
			defer cancel()
			defer context.AfterFunc(c.life, cancel)()
		}
		r, err := nd.release(ctx, h, n)
		return r.ok && err == nil, err
	}, func(ok bool) bool { return ok })
	var v votes
	for _, r := range rs {
		switch {
		case r.err != nil:
			v.errs = append(v.errs, r.err)
		case r.val:
			v.yes++
		default:
			v.no++
		}
	}
	return v
}

// unlockContext is the context of an unlock's Redis calls: without the
// cancellation of ctx, the level's context, so that a cancelled request
// still releases, and until ctx's deadline (at least unlockGrace from now)
// or, without one, releaseTimeout.
func unlockContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(releaseTimeout)
	if d, ok := ctx.Deadline(); ok {
		deadline = maxTime(d, time.Now()).Add(unlockGrace)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// unlockRelease is an unlock's release within ctx (see unlockContext). A
// final release Redis did not confirm (an error, node timeouts, or ctx
// ending) goes on in the background.
func (h *hold) unlockRelease(ctx context.Context, n int) error {
	err := h.release(ctx, n)
	if err != nil && err != ErrLost && n == 0 {
		h.c.jan.abandon(h, true, 0) // not confirmed: the janitor tries until Redis answers
	}
	if err != nil && err != ErrLost && ctx.Err() != nil {
		if h.c.isClosed() {
			return ErrClosed
		}
		return h.notConfirmed(ctx)
	}
	return err
}

// notConfirmed is the error of an unlock whose release Redis did not
// confirm before ctx's deadline.
func (h *hold) notConfirmed(ctx context.Context) error {
	return fmt.Errorf("lock: release %q not confirmed in time (it goes on in the background): %w", h.key, ctx.Err())
}

// abandon ends l, whose unlock could not send its release before ctx's
// deadline because another command of the hold is stuck in Redis: the
// level ends here, and the janitor releases the owner if that was the
// last one.
func (l *level) abandon(ctx context.Context) error {
	h := l.h
	h.mu.Lock()
	if l.unlocked {
		h.mu.Unlock()
		return l.notHeld()
	}
	ended := h.endLevelsLocked(l, make([]*level, 0, 1))
	last := len(h.levels) == 0
	err := h.notConfirmed(ctx)
	if h.c.isClosed() {
		err = ErrClosed // Close cut the unlock (see unlock)
	}
	if h.end == nil {
		for _, x := range ended {
			h.c.reportRelease(x, err)
		}
	}
	if last {
		h.endLocked(errDone)
	}
	h.mu.Unlock()
	if last {
		h.c.jan.abandon(h, true, 0)
	}
	for _, x := range ended[1:] {
		x.cancel(errOuterUnlocked)
	}
	if err == ErrClosed {
		l.cancel(ErrClosed)
	} else {
		l.cancel(errUnlocked)
	}
	return err
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// endLocked ends the hold with cause: its lease is no longer renewed, and
// the contexts of its live levels are cancelled with cause.
func (h *hold) endLocked(cause error) {
	if h.end != nil {
		return
	}
	h.end = cause
	h.c.wd.remove(h)
	if cause != errDone {
		h.c.wt.released(h.rk, handOff{}) // an unlock wakes them once Redis released
	}
	for _, l := range h.levels {
		h.c.reportRelease(l, cause) // first, so the observer is done when ctx is
		l.cancel(cause)
	}
}

// expire runs when the validity ends without a confirmed renewal.
func (h *hold) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.end == nil && !time.Now().Before(h.validUntil) { // else a renewal raced the watchdog
		h.loseLocked(LossNotRenewed)
	}
}

// renewed records a watchdog renewal sent at sent: alive tells whether
// Redis still had the owner. It reports whether this ended the hold.
func (h *hold) renewed(sent time.Time, alive bool) (lost bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.end != nil {
		return false
	}
	if !alive {
		h.loseLocked(LossKeyGone)
		return true
	}
	h.handed.Store(false)
	// A confirmation that arrives after the validity it would extend proves
	// nothing (the watchdog may just not have ended the hold yet).
	if until := sent.Add(h.validity()); until.After(h.validUntil) && time.Now().Before(until) {
		h.validUntil = until
		h.c.wd.extended(h, until)
	}
	return false
}

func (c *Client) reportRelease(l *level, cause error) {
	if o := c.cfg.observer; o != nil {
		o.Released(l.ctx, Release{Key: l.h.key, Reentrant: l.reentrant, Held: time.Since(l.start), Cause: cause, Loss: l.h.lossOf(cause)})
	}
}

// findLevel returns the innermost level of key that ctx carries and that
// was not unlocked, taken by c, or by any Client when c is nil. Its hold
// may have ended by loss or Close.
func findLevel(ctx context.Context, c *Client, key string) *level {
	l, _ := ctx.Value(levelKey{}).(*level)
	for ; l != nil; l = l.prev {
		if l.h.key != key || (c != nil && l.h.c != c) {
			continue
		}
		l.h.mu.Lock()
		unlocked := l.unlocked
		l.h.mu.Unlock()
		if !unlocked {
			return l
		}
	}
	return nil
}

// live reports whether the hold has not ended and its validity has not
// run out.
func (h *hold) live() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkValidityLocked()
	return h.end == nil
}

// Held reports whether ctx holds key: it was returned by a successful
// [Client.Lock] or [Client.TryLock] of key, or derives from one (also
// through [context.WithoutCancel]), that hold level was not unlocked, and
// its lease was not lost, ended by Close or let lapse. Held does not look
// at ctx.Err(): a context of [WithHoldUntilUnlock] that was cancelled still
// holds the key until unlock.
func Held(ctx context.Context, key string) bool {
	l := findLevel(ctx, nil, key)
	return l != nil && l.h.live()
}

// FencingToken returns the fencing token of the hold on key that ctx
// carries, and whether ctx holds key (see [Held]) with a token. Tokens
// strictly increase with every new acquisition of a key, across all Clients
// sharing the Redis, across expiries and across a flush or a restart
// without persistence (see "Fencing tokens" in the package documentation),
// so storage can reject writes from a stale holder. Re-entries share the outermost acquisition's token. A
// Client made by [NewQuorum] has no tokens: ok is false.
func FencingToken(ctx context.Context, key string) (uint64, bool) {
	if l := findLevel(ctx, nil, key); l != nil && len(l.h.c.nodes) == 1 && l.h.live() {
		return l.h.token, true
	}
	return 0, false
}
