package lock

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

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

// released tells this process's waiters of rk's key that it was released,
// as the message would: next is the waiter it was handed to, or none when
// there is no queue in Redis or nobody waited.
func (w *waiters) released(rk redisKeys, next handOff) {
	signal(w.toWake(rk, next))
}

// wakeFirst wakes this process's first waiter of rk's key, unless its
// owner is except (see backend.freed).
func (w *waiters) wakeFirst(rk redisKeys, except string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[w.c.be.channel(rk)]; q != nil && len(q.list) > 0 && q.list[0].owner != except {
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
	q := w.queues[w.c.be.channel(rk)]
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
	channel := w.c.be.channel(h.rk)
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
			s.Ask(channel, true)
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
		if wasFirst && (!w.c.be.queued() || time.Now().Before(w.slowUntil)) {
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
		s.Ask(q.channel, false)
	}
}

// Message handles a message on channel: "<from> <next> <token> <ms>"
// hands the key to next, "<from> <next>" gives next the turn; a plain
// "<from>" (quorum mode) announces a release to the first waiter, unless
// it is this Client's own, whose waiters were woken already.
func (w *waiters) Message(channel, payload string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[channel]
	if q == nil {
		return
	}
	from, rest, named := strings.Cut(payload, " ")
	switch {
	case named:
		g := parseTurn(rest)
		w.noteMessage(g.at)
		signal(q.turn(g))
	case !w.c.ownedBy(from) && len(q.list) > 0:
		signal(q.list[0].wake)
	}
}

// Subscribed wakes every waiter of channel's key when Redis confirmed its
// subscription: the first through ready, later ones (reconnections, when
// messages may have been missed) here.
func (w *waiters) Subscribed(channel string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[channel]
	if q == nil {
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

// Recheck wakes every waiter of this Client once: one of its pub/sub
// connections left a health-check PING unanswered, so a hand-off or turn
// told on it may be lost or late, and each waiter's attempt finds out (a
// hand-off a waiter was given is kept for it a while; see hand_off in
// queue.lua). Rare, and only while a connection is unhealthy; on Redis
// Cluster, whose connections carry a channel each, it wakes the waiters of
// other keys too.
func (w *waiters) Recheck() {
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
