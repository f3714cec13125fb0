package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker is what packages ginlock, cronlock and otellock accept. [*Client]
// implements it.
type Locker interface {
	Lock(ctx context.Context, key string, opts ...LockOption) (context.Context, UnlockFunc, error)
	TryLock(ctx context.Context, key string, opts ...LockOption) (context.Context, UnlockFunc, error)
}

// UnlockFunc releases one hold level. It is safe to call from any
// goroutine and with a cancelled context around: the Redis call runs
// without the caller's cancellation, bounded by a timeout of its own.
//
// It returns nil when Redis confirmed the release, [ErrNotHeld] when it was
// already called (Redis is not touched again; while that call, or the
// unlock of a level this one was entered through, is still under way, it
// returns when that one does), [ErrLost] when the lease had
// been lost before, [ErrClosed] when [Client.Close] ended the hold (also
// while this unlock's release was on its way: Close cuts an unlock still
// waiting for Redis, and what the release owes Redis goes on in the
// background), or the Redis error (the lease then lapses by itself).
// Afterwards the level's lock context is cancelled with a cause that
// matches [ErrNotHeld] ([ErrLost] if the lease was lost first, [ErrClosed]
// if Close ended the hold or cut the unlock), never plain
// [context.Canceled], which means the caller's own context ended while the
// lock was still held. Check [context.Cause] to tell the two apart.
type UnlockFunc func() error

// Client takes locks on one Redis deployment. It is safe for concurrent
// use. Create it with [New] and call [Client.Close] when done.
type Client struct {
	nodes    []*node // one, or several independent masters in quorum mode
	quorum   int     // nodes that must confirm: len(nodes)/2 + 1
	claim    int64   // claim window (ms) of the wait queue; 0 in quorum mode, which has none
	claimArg any     // claim, boxed once for script calls
	cfg      config
	id       string // random, then host, pid and label (see clientID); every owner is id:seq
	seq      atomic.Uint64

	// The default lease and its linger time (see newHold) in ms, boxed
	// once for script calls.
	leaseArg, lingerArg any
	keys                *keyCache

	callsMu     sync.Mutex
	calls       map[*call]struct{} // Lock and TryLock calls under way (see callContext)
	callsClosed bool

	life      context.Context // cancelled by Close
	stop      context.CancelFunc
	closeOnce sync.Once
	closed    chan struct{} // closed when Close returns
	closeBy   time.Time     // when Close returns at the latest; set before life ends
	tasks     *tasks        // the Client's goroutines
	wd        *watchdog
	wt        *waiters
	jan       *janitor
}

var _ Locker = (*Client)(nil)

// New returns a Client that takes locks on rdb: a [*redis.Client] (also
// one from [redis.NewFailoverClient], for Sentinel), a [*redis.ClusterClient]
// (sharded pub/sub is used for wake-ups) or any other
// [redis.UniversalClient] whose commands reach one Redis deployment. A
// [*redis.Ring] is refused: it spreads keys over servers by a hash of the
// ring's current members, so a member joining or leaving moves a held lock
// to a server where another owner can take it. The Client does not own
// rdb: Close leaves it open.
//
// Defaults: lease [DefaultLease] (30 s) renewed by the watchdog every 10 s,
// key prefix [DefaultPrefix], drift allowance 1% of the lease + 2 ms, no
// observer, owners naming the host and process id but no label (see
// [WithOwnerLabel]), logging to [slog.Default]. It returns an error
// wrapping [ErrInvalid] for a nil rdb, a Ring or a bad option.
//
// New makes one Redis call, CONFIG GET maxmemory*, waiting for its answer
// at most 50 ms (the rest, up to 1 s, goes on in the background), and logs
// one Warn (see [WithLogger]) naming the policy when
// maxmemory-policy is not noeviction: every other policy may evict lock
// keys (volatile-* evicts exactly the keys with a TTL, held locks among
// them), and an evicted lock is taken by another owner before its holder
// learns of it at its next renewal. Where CONFIG GET is refused (managed
// Redis often renames it) or unanswered, New logs at Debug and goes on.
//
// New starts the watchdog, the janitor (which cleans up after calls cut
// short) and a subscriber of pub/sub channels: three goroutines, which end
// at Close.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if err := checkRedis(rdb); err != nil {
		return nil, err
	}
	return newClient([]redis.UniversalClient{rdb}, opts)
}

// checkRedis refuses a Redis client a lock cannot live on.
func checkRedis(rdb redis.UniversalClient) error {
	if isNil(rdb) {
		return invalidf("nil Redis client")
	}
	if _, ok := rdb.(*redis.Ring); ok {
		return invalidf("a redis.Ring cannot hold locks: a change of its members moves keys between servers (use a Redis Cluster, or NewQuorum over independent servers)")
	}
	return nil
}

func newClient(rdbs []redis.UniversalClient, opts []Option) (*Client, error) {
	cfg := config{lease: DefaultLease, prefix: DefaultPrefix, logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("lock: owner id: %w", err)
	}
	c := &Client{
		quorum: len(rdbs)/2 + 1,
		cfg:    cfg,
		id:     clientID(id, hostName(), cfg.label),
	}
	for _, rdb := range rdbs {
		nd, err := newNode(rdb, cfg)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, nd)
	}
	if len(c.nodes) == 1 {
		c.claim = claimWindow.Milliseconds()
	}
	c.claimArg = c.claim
	c.leaseArg, c.lingerArg = leaseArgs(cfg.lease)
	c.keys = newKeyCache(cfg.prefix)
	c.tasks = newTasks()
	c.life, c.stop = context.WithCancel(cfg.background())
	c.calls = make(map[*call]struct{})
	if nd := c.nodes[0]; len(c.nodes) == 1 && !nd.sharded && nd.acks == 0 {
		nd.pipe = newPipe(nd, c.tasks, c.life)
	}
	c.closed = make(chan struct{})
	c.wd = newWatchdog(c)
	c.wt = newWaiters(c)
	c.jan = newJanitor(c)
	c.tasks.run(c.wd.run)
	c.tasks.run(c.jan.run)
	for _, s := range c.wt.subs {
		c.tasks.run(s.run)
	}
	c.startEvictionCheck()
	return c, nil
}

func isNil(rdb redis.UniversalClient) bool {
	switch r := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return r == nil
	case *redis.ClusterClient:
		return r == nil
	case *redis.Ring:
		return r == nil
	}
	return false
}

// Close ends every lock still held: its context is cancelled with cause
// [ErrClosed], its lease is no longer renewed, and Close releases its key
// in Redis, best effort (a key Redis did not confirm releasing lapses within
// its lease). It wakes every waiting Lock with ErrClosed and takes it out
// of the key's wait queue in Redis before it returns (if Redis answers in
// time), so that no release hands a key to a closed Client, has the waiters
// of other Clients check the keys it handed over in the last claim window
// (1 s), which it can no longer check itself, and stops the Client's
// goroutines.
//
// Close returns within 1 s whatever Redis does: a Redis call still under
// way then ends in the background when the Redis client gives up (its read
// timeout; close rdb to end it at once). An [UnlockFunc] of a lock Close
// ended returns ErrClosed and makes no Redis call. Later calls of Lock,
// TryLock and Close return ErrClosed; a Close called while another runs
// waits for it.
func (c *Client) Close() error {
	first := false
	c.closeOnce.Do(func() { first = true })
	if !first {
		<-c.closed
		return ErrClosed
	}
	defer close(c.closed)
	deadline := time.Now().Add(closeTimeout)
	c.closeBy = deadline
	c.stop()
	c.closeCalls()
	holds := c.wd.closeAll()
	c.releaseAll(holds, deadline.Add(-closeTimeout/2))
	c.handOverChecks(c.wt.close(), deadline.Add(-closeTimeout/4))
	c.tasks.close(time.Until(deadline))
	return nil
}

// releaseAll releases the keys of holds in Redis, one pipeline per node,
// waiting for the answers until deadline.
func (c *Client) releaseAll(holds []*hold, deadline time.Time) {
	if len(holds) == 0 {
		return
	}
	c.onEveryNode(deadline, func(ctx context.Context, nd *node) { nd.releaseAll(ctx, holds) })
}

// onEveryNode runs f on every node under the Client's background context
// (its values, not its end, which Close has brought) bounded by deadline,
// and returns when all are done or the deadline passed (see fanOut): the
// last writes of Close.
func (c *Client) onEveryNode(deadline time.Time, f func(context.Context, *node)) {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(c.life), deadline)
	defer cancel()
	fanOut(c, ctx, 0, func(ctx context.Context, nd *node) (struct{}, error) {
		f(ctx, nd)
		return struct{}{}, nil
	}, nil)
}

func (c *Client) isClosed() bool { return c.life.Err() != nil }

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
	return c.acquire(ctx, key, false, opts)
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
	return c.acquire(ctx, key, true, opts)
}

// call is one Lock or TryLock call under way.
type call struct {
	ctx   context.Context // the caller's; lock contexts derive from it
	rctx  context.Context // for Redis calls and waiting: the observer's, or ctx
	start time.Time
	a     Acquire // what the observer is told

	// Cancel the call's context (see callContext).
	cancel      context.CancelCauseFunc
	cancelLimit context.CancelFunc // nil without a wait limit
}

func (c *Client) acquire(ctx context.Context, key string, try bool, opts []LockOption) (context.Context, UnlockFunc, error) {
	outer := findLevel(ctx, c, key)
	lc, optErr := c.cfg.lockConfig(opts) // first: observers get the name
	if optErr != nil {
		lc.name = "" // a rejected name is never recorded
	}
	cl := &call{ctx: ctx, rctx: ctx, start: time.Now(), a: Acquire{Key: key, Name: lc.name, Try: try, Reentrant: outer != nil, Internal: lc.internal}}
	obs := c.cfg.observer
	if obs != nil {
		cl.rctx = obs.AcquireStarted(ctx, cl.a)
	}
	open := !c.isClosed()
	lvl, err := c.obtain(cl, lc, optErr, outer)
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
func (c *Client) callContext(cl *call, lc lockConfig) context.Context {
	return c.callContextOn(cl, lc, cl.rctx)
}

// callContextOn is callContext over base, which derives from cl.rctx.
func (c *Client) callContextOn(cl *call, lc lockConfig, base context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(base)
	cl.cancel = cancel
	c.callsMu.Lock()
	if c.callsClosed {
		cancel(ErrClosed)
	} else {
		c.calls[cl] = struct{}{}
	}
	c.callsMu.Unlock()
	if lc.waitSet {
		ctx, cl.cancelLimit = context.WithDeadlineCause(ctx, cl.start.Add(lc.maxWait), errWaitLimit)
	}
	return ctx
}

// endCall cancels the context of a call that callContext made. The last
// call to end after Close wakes the janitor, which Close waits for: the
// call handed it what the call owes Redis (leaving the queue) first.
func (c *Client) endCall(cl *call) {
	c.callsMu.Lock()
	delete(c.calls, cl)
	last := c.callsClosed && len(c.calls) == 0
	c.callsMu.Unlock()
	if last {
		signal(c.jan.kick)
	}
	if cl.cancelLimit != nil {
		cl.cancelLimit()
	}
	cl.cancel(nil)
}

// closeCalls cancels the context of every call under way with ErrClosed,
// and of any call that starts later.
func (c *Client) closeCalls() {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	c.callsClosed = true
	for cl := range c.calls {
		cl.cancel(ErrClosed)
	}
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
		c.jan.abandon(h, h.mayHold, leaveWait)
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
		c.jan.abandon(h, true, leaveWait)
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

func (c *Client) newOwner(internal bool) string {
	var buf [80]byte // owners are at most 63 bytes (see clientID): one allocation, the string
	b := append(append(buf[:0], c.id...), ':')
	if internal {
		b = append(b, internalMark) // see Owner.Internal
	}
	return string(strconv.AppendUint(b, c.seq.Add(1), 36))
}

// ownedBy reports whether owner o is one of c's ("<client id>:<seq>").
func (c *Client) ownedBy(o string) bool {
	return len(o) > len(c.id) && o[len(c.id)] == ':' && strings.HasPrefix(o, c.id)
}
