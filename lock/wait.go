package lock

import (
	"context"
	"sync"
	"time"

	"github.com/lockkit/lockkit/lock/internal/pubsub"
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
	subs   []*pubsub.Subscriber // per node
	mu     sync.Mutex           // never held over a Redis call
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

func newWaiters(c *Client) *waiters {
	w := &waiters{c: c, queues: make(map[string]*queue), checks: make(map[string]*pendingCheck)}
	for _, nd := range c.be.nodes().nodes {
		w.subs = append(w.subs, pubsub.New(c.life, nd.rdb, nd.sharded, c.tasks, w, claimWindow))
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
// Where Redis keeps the key's wait queue (see backend.queued), every
// waiter is in it: a release hands the key to the first, which learns it
// from the message (or from the releasing call, in this process) and
// starts without another command; a waiter given a turn instead tries.
// Without such a queue, only this process's first waiter of the key
// tries, so a release does not send every local waiter at Redis at once.
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
		} else if !w.c.be.queued() && !w.isFirst(q, me) {
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
