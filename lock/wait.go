package lock

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// claimWindow is how long a free lock is kept for the first queued waiter,
// whose turn it is (see queue.lua). A waiter that does not try within it,
// because its process died or stalled, loses its place and the next waiter
// gets the turn; the waiters behind it try again after the window.
const claimWindow = time.Second

// linger is how long a key's subscription is kept after its last waiter
// left, so that a key in steady demand is not subscribed to again for
// every wait.
const linger = time.Second

// waiters lets Lock calls sleep until their turn is announced. Subscriptions
// are shared per Client and reference-counted per key: on a single Redis
// one pub/sub connection carries every channel; on Redis Cluster each
// waited-for key gets a sharded subscription on the node owning its slot.
// In quorum mode every node is subscribed to, and a message from any of
// them wakes the first waiter.
type waiters struct {
	c      *Client
	subs   []*subscriber // per node
	mu     sync.Mutex    // never held over a Redis call
	queues map[string]*queue
	checks map[string]*pendingCheck // by lock key: a check due after a hand-off (see checkLater)
	closed bool

	// Slow pub/sub (see slowMessage): Redis's clock less this process's,
	// in ms, as the last attempt of a waiter saw it (a lower bound: Redis
	// ran the attempt before its reply came), and until when hand-offs are
	// checked by command.
	offset    int64
	offsetSet bool
	slowUntil time.Time
}

// queue holds the waiters of one key in this process, in arrival order,
// and the key's subscription.
type queue struct {
	channel   string
	list      []*waiter     // guarded by waiters.mu
	idle      *time.Timer   // guarded by waiters.mu; runs while list is empty
	ready     chan struct{} // closed when Redis confirmed the subscription
	readyOnce sync.Once
}

// A waiter is one Lock call waiting for its key.
type waiter struct {
	owner  string
	lapses int                // used by the waiting goroutine: times it was dropped from the queue and queued again (see Acquire.Lapses)
	wake   chan struct{}      // capacity 1: try now, or see given
	soon   chan time.Duration // capacity 1: another Client's waiter has the key or the turn; try after this, if it is gone
	given  handOff            // guarded by waiters.mu: the key was handed to this waiter
	watch  time.Time          // used by the waiting goroutine: when it tries because of soon; zero once it tried
}

func newWaiters(c *Client) *waiters {
	w := &waiters{c: c, queues: make(map[string]*queue), checks: make(map[string]*pendingCheck)}
	for _, nd := range c.nodes {
		w.subs = append(w.subs, newSubscriber(w, nd))
	}
	return w
}

// unansweredAfter is how long a waiter's retry must have gone unanswered,
// when the call's deadline or wait limit cut it off, for the call to end as
// Redis not answering rather than as the key held: a healthy Redis answers
// a lock script in a few milliseconds.
const unansweredAfter = 100 * time.Millisecond

// wait blocks until h's key is taken for h's owner or ctx, the call's
// context (see [Client.callContext]), is done. me is h's waiter in q, the key's
// queue; confirmed tells whether the subscription was confirmed before
// me joined q and made its last attempt, last, so that attempt saw every
// release announced before and every later one reaches me. The waiter
// tries again when the time that attempt said to wait runs out (the
// holder's lease, or the turn of the waiter before) even if no release is
// announced, so a lost message delays it, never strands it.
//
// With one Redis, every waiter is in the key's wait queue in Redis: a
// release hands the key to the first, which learns it from the message
// (or from the releasing call, in this process) and starts without another
// command; a waiter given a turn instead tries. In quorum mode, which has
// no such queue, only this process's first waiter of the key tries, so a
// release does not send every local waiter at Redis at once.
func (w *waiters) wait(ctx context.Context, h *hold, q *queue, me *waiter, confirmed bool, last attemptResult) (attemptResult, error) {
	ready := q.ready
	if confirmed {
		ready = nil
	}
	w.sawClock(last)
	next := w.retryIn(q, me, last.remaining)
	retry := time.NewTimer(next)
	defer retry.Stop()
	due := time.Now().Add(next)
	for {
		select {
		case <-ready:
			ready = nil // subscribed: try, a release may have come before
		case <-me.wake:
		case d := <-me.soon:
			// Another Client's waiter was handed the key, or has a turn
			// because waiters before it missed theirs: it may be gone, so
			// try when that would show (see queue.turn), unless told sooner.
			if time.Until(due) > d {
				due = time.Now().Add(d)
				retry.Reset(d)
				me.watch = due
			}
			continue
		case <-retry.C:
		case <-ctx.Done():
			return attemptResult{}, ended(ctx, h.key, last.remaining, false)
		}
		select {
		case <-me.wake: // this attempt sees every release announced so far
		default:
		}
		if g := w.takeGiven(me); g.owner != "" {
			if res, ok := h.handedOff(g, last); ok {
				return res, nil
			}
		} else if w.c.claim == 0 && !w.isFirst(q, me) {
			due = time.Now().Add(retryAfter(last.remaining))
			retry.Reset(retryAfter(last.remaining))
			continue
		}
		sent := time.Now()
		me.watch = time.Time{}
		res, err := h.attempt(ctx, true)
		if err != nil && ctx.Err() != nil {
			// Cut off: the key was held at the last answer; but a retry
			// left unanswered for long is a stalled Redis, not contention.
			return attemptResult{}, ended(ctx, h.key, last.remaining, time.Since(sent) >= unansweredAfter)
		}
		if err != nil || res.ok {
			return res, err
		}
		if res.position > 0 { // queued again: it had lost its place
			me.lapses++
		}
		last = res
		w.sawClock(last)
		next = w.retryIn(q, me, last.remaining)
		due = time.Now().Add(next)
		retry.Reset(next)
	}
}

// takeGiven returns and clears the hand-off me was told of, if any.
func (w *waiters) takeGiven(me *waiter) handOff {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := me.given
	me.given = handOff{}
	return g
}

// retryAfter is when to try again without a message: just after the time
// the last attempt was told, a millisecond when it was told 0 (under a
// millisecond left). When that is unknown (a negative PTTL: a key without
// TTL, not written by lockkit) it is a second.
func retryAfter(remaining time.Duration) time.Duration {
	if remaining < 0 {
		return time.Second
	}
	return remaining + time.Millisecond
}

// released tells this process's waiters of rk's key that it was released,
// as the message would: next is the waiter it was handed to, or none when
// there is no queue in Redis or nobody waited.
func (w *waiters) released(rk redisKeys, next handOff) {
	signal(w.toWake(rk, next))
}

// letGo wakes this process's first waiter of h's key when h's final
// release in quorum mode let go of a node: its message wakes the first
// waiter of every other Client, and a Client skips its own messages. Also
// after a release that did not win, as when two Lock calls of this Client
// split the nodes: each lets go of its minority, and neither would try
// again until the lease it last saw ends. Not h's own waiter, whose
// attempt let go of a minority and tries again when that attempt said.
func (w *waiters) letGo(h *hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[w.c.waitChannel(h.rk)]; q != nil && len(q.list) > 0 && q.list[0].owner != h.owner {
		signal(q.list[0].wake)
	}
}

// toWake is released but for the wake-up itself: it returns the wake
// channel of the waiter to signal, or nil.
func (w *waiters) toWake(rk redisKeys, next handOff) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queues) == 0 {
		return nil
	}
	q := w.queues[w.c.waitChannel(rk)]
	switch {
	case q == nil:
		return nil
	case next.owner != "":
		return q.turn(next)
	case len(q.list) > 0:
		return q.list[0].wake
	}
	return nil
}

// turn returns the wake channel of the waiter the key was handed to
// (next.token set, which it notes) or given the turn, if it is this
// process's. When it is another Client's, the first waiter here learns
// when to try in case that waiter is gone: just after the claim window for
// a hand-off (told to this Client as the watcher of the queue), when the
// turn opens to any queued waiter for a turn (told to every Client).
// Called with waiters.mu held.
func (q *queue) turn(next handOff) chan struct{} {
	for _, wt := range q.list {
		if wt.owner == next.owner {
			if next.token != 0 {
				wt.given = next
			}
			return wt.wake
		}
	}
	if len(q.list) > 0 {
		d := claimWindow/10 + time.Millisecond
		if next.token != 0 {
			d = claimWindow + time.Millisecond
		}
		select {
		case q.list[0].soon <- d:
		default:
		}
	}
	return nil
}

// isFirst reports whether me is this process's first waiter of q's key.
func (w *waiters) isFirst(q *queue, me *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return q.list[0] == me
}

// signal wakes the goroutine that waits on ch, unless a wake-up is pending
// already; a nil ch wakes nobody.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// join adds a waiter for h to its key's queue in this process, and
// reports whether the key's subscription was confirmed already. When the
// key has no queue, join makes one and subscribes to its channel if
// subscribe is set, and otherwise adds nothing and returns nil: a Lock
// joins before its first attempt only where a subscription exists, so an
// uncontended Lock sends no SUBSCRIBE.
func (w *waiters) join(h *hold, subscribe bool) (*queue, *waiter, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queues) == 0 && !subscribe {
		return nil, nil, false
	}
	channel := w.c.waitChannel(h.rk)
	q := w.queues[channel]
	if q == nil && !subscribe {
		return nil, nil, false
	}
	me := &waiter{owner: h.owner, wake: make(chan struct{}, 1), soon: make(chan time.Duration, 1)}
	if q != nil {
		if q.idle != nil {
			q.idle.Stop()
			q.idle = nil
		}
		q.list = append(q.list, me)
		select {
		case <-q.ready:
			return q, me, true
		default:
			return q, me, false
		}
	}
	q = &queue{channel: channel, list: []*waiter{me}, ready: make(chan struct{})}
	w.queues[channel] = q
	if !w.closed {
		for _, s := range w.subs {
			s.ask(channel, true)
		}
	}
	return q, me, false
}

// leave removes a waiter. When it was the last, the subscription is
// dropped after linger unless another waiter comes.
func (w *waiters) leave(q *queue, me *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wasFirst := q.list[0] == me
	q.list = slices.DeleteFunc(q.list, func(x *waiter) bool { return x == me })
	switch {
	case len(q.list) > 0:
		if wasFirst && (w.c.claim == 0 || time.Now().Before(w.slowUntil)) {
			signal(q.list[0].wake) // the next one tries in its place (or polls: see slowMessage)
		}
		if d, ok := me.pendingWatch(); ok { // the next one checks in its place
			select {
			case q.list[0].soon <- d:
			default: // it has a check of its own to make
			}
		}
	case w.closed:
		delete(w.queues, q.channel)
	default:
		q.idle = time.AfterFunc(linger, func() { w.drop(q) })
	}
}

// pendingWatch returns when, from now, the check me was told to make
// (see queue.turn) is due, if it has not made it: a notice it has not
// read, or one it was waiting for when it left.
func (me *waiter) pendingWatch() (time.Duration, bool) {
	select {
	case d := <-me.soon:
		return d, true
	default:
	}
	if me.watch.IsZero() {
		return 0, false
	}
	return max(time.Until(me.watch), 0), true
}

// drop unsubscribes from q's channel unless a waiter came meanwhile.
func (w *waiters) drop(q *queue) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(q.list) > 0 || w.queues[q.channel] != q {
		return
	}
	delete(w.queues, q.channel)
	for _, s := range w.subs {
		s.ask(q.channel, false)
	}
}

// dispatch handles a message: "<from> <next> <token> <ms>" hands the key
// to next, "<from> <next>" gives next the turn; a plain "<from>" (quorum
// mode) announces a release to the first waiter, unless it is this
// Client's own, whose waiters were woken already.
// A confirmed subscription wakes every waiter: the first through ready,
// later ones (reconnections, when messages may have been missed) here.
func (w *waiters) dispatch(msg any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch m := msg.(type) {
	case *redis.Message:
		q := w.queues[m.Channel]
		if q == nil {
			return
		}
		from, rest, named := strings.Cut(m.Payload, " ")
		switch {
		case named:
			g := parseTurn(rest)
			w.noteMessage(g.at)
			signal(q.turn(g))
		case !w.c.ownedBy(from) && len(q.list) > 0:
			signal(q.list[0].wake)
		}
	case *redis.Subscription:
		q := w.queues[m.Channel]
		if q == nil || (m.Kind != "subscribe" && m.Kind != "ssubscribe") {
			return
		}
		first := false
		q.readyOnce.Do(func() { close(q.ready); first = true })
		if !first { // a reconnection: ready was seen long ago
			for _, wt := range q.list {
				signal(wt.wake)
			}
		}
	}
}

// recheck wakes every waiter of this Client once: one of its pub/sub
// connections left a health-check PING unanswered, so a hand-off or turn
// told on it may be lost or late, and each waiter's attempt finds out (a
// hand-off a waiter was given is kept for it a while; see hand_off in
// queue.lua). Rare, and only while a connection is unhealthy; on Redis
// Cluster, whose connections carry a channel each, it wakes the waiters of
// other keys too.
func (w *waiters) recheck() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range w.queues {
		for _, wt := range q.list {
			signal(wt.wake)
		}
	}
}

// parseTurn reads "<next> <token> <ms>" (a hand-off) or "<next>" (a turn).
// A hand-off whose numbers do not parse counts as a turn: the waiter tries.
func parseTurn(s string) handOff {
	owner, nums, _ := strings.Cut(s, " ")
	g := handOff{owner: owner}
	tok, at, _ := strings.Cut(nums, " ")
	var err1, err2 error
	g.token, err1 = strconv.ParseInt(tok, 10, 64)
	g.at, err2 = strconv.ParseInt(at, 10, 64)
	if err1 != nil || err2 != nil {
		return handOff{owner: owner}
	}
	return g
}

// waitChannel is the channel this Client's waiters of rk's key listen on:
// its own (see queue.lua), or in quorum mode, which has no queue, the
// key's.
func (c *Client) waitChannel(rk redisKeys) string {
	if c.claim == 0 {
		return rk.channel
	}
	return rk.channel + ":" + c.id
}

// checkLater has h's key checked just after the claim window, with
// acquire.lua's check mode: h's release handed it to another Client's
// waiter, whose process may be dead. Every other Client learns of no
// hand-off but its own, so only this one, alive at the release, is sure to
// notice one that was never confirmed; the check then gives the next
// waiter its turn. A receiver whose Client took the message keeps its
// place half a window longer (see hand_off in queue.lua), and a turn the
// check started may be missed too: while the first waiter's turn or place
// is still on, the key is checked again when it ends (see checkIn). One
// check at a time per key.
func (w *waiters) checkLater(h *hold) {
	w.checkIn(h.rk, h.leaseArg, claimWindow+checkMargin)
}

// checkMargin is how long after a turn or place ends a check runs.
const checkMargin = 5 * time.Millisecond

// checkIn has rk's key checked in d, and again while the check finds a
// waiter's turn or place that ends within a window and a half (a hand-off
// or a turn; not a waiter queued behind a held lease).
func (w *waiters) checkIn(rk redisKeys, lease any, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.checks[rk.lock] != nil {
		return
	}
	pc := &pendingCheck{rk: rk, lease: lease}
	pc.timer = time.AfterFunc(d, func() {
		w.mu.Lock()
		delete(w.checks, pc.rk.lock)
		w.mu.Unlock()
		w.c.tasks.run(func() {
			if again := w.c.check(pc.rk, pc.lease); again > 0 && again <= claimWindow+claimWindow/2 {
				w.checkIn(pc.rk, pc.lease, again+checkMargin)
			}
		})
	})
	w.checks[rk.lock] = pc
}

// A pendingCheck is a check after a hand-off that is not due yet.
type pendingCheck struct {
	timer *time.Timer
	rk    redisKeys
	lease any
}

// check runs acquire.lua's check mode on rk's key, bounded by
// cleanupTimeout, and returns when the first waiter's turn or place ends
// (0: the key is held, nobody waits, or Redis did not answer: the
// waiters' own timers remain).
func (c *Client) check(rk redisKeys, lease any) time.Duration {
	ctx, cancel := context.WithTimeout(c.life, cleanupTimeout)
	defer cancel()
	nd := c.nodes[0]
	v, err := nd.run(ctx, acquireScript, rk, c.newOwner(false), lease, 1, c.claimArg, checkMode, nd.publish).Int64Slice()
	if err != nil || len(v) < 2 {
		return 0
	}
	return time.Duration(v[1]) * time.Millisecond
}

// handOverChecks has every Client with a queued waiter of the keys of
// pending, checks Close dropped, watch the hand-offs they were for
// (acquire.lua's watch mode), in one pipeline, waiting for Redis until
// deadline: a Client that closes right after releasing (a deploy) must
// not leave a hand-off to a dead waiter unchecked.
func (c *Client) handOverChecks(pending []*pendingCheck, deadline time.Time) {
	if len(pending) == 0 {
		return
	}
	c.onEveryNode(deadline, func(ctx context.Context, nd *node) {
		nd.pipelined(ctx, len(pending), func(i int) (script, []string, []any) {
			pc := pending[i]
			return acquireScript, pc.rk.keys(), []any{c.newOwner(false), pc.lease, 1, c.claimArg, watchMode, nd.publish}
		})
	})
}

// close stops the idle timers and the checks not due yet, which it
// returns; the subscribers close the subscriptions when the Client's life
// ends, and their listeners end with them.
func (w *waiters) close() []*pendingCheck {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, q := range w.queues {
		if q.idle != nil {
			q.idle.Stop()
		}
	}
	var pending []*pendingCheck
	for _, pc := range w.checks {
		if pc.timer.Stop() {
			pending = append(pending, pc)
		}
	}
	return pending
}
