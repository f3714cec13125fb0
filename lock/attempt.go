package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

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

// attempt tries once to take the key for a new owner; with wait, a failed
// attempt joins the key's wait queue.
func (h *hold) attempt(ctx context.Context, wait bool) (attemptResult, error) {
	be := h.c.be
	set := be.nodes()
	h.releasing.Store(false) // a minority released after a failed attempt is taken again
	sent := time.Now()
	var room [1]nodeResult[[]int64]
	rs := fanOutWith(set, ctx, be.timeout(h.lease), acquireOn, acquireArgs{h: h, n: 1, wait: wait}, gotKey, room[:])
	answered := time.Now()
	var v votes
	var token uint64
	var heldFor []time.Duration
	var redisAt int64
	var position int
	taken := false    // some node may have given us the key
	reserved := false // the key was free but kept for a queued waiter
	for _, r := range rs {
		if r.err == nil && r.val[0] <= -3 {
			return attemptResult{}, refusal(h.key, h.kind(), h.limit, r.val)
		}
		switch {
		case r.err != nil:
			v.errs = append(v.errs, r.err)
			taken = taken || mayHaveRun(r.err)
		case r.val[0] == 1:
			v.yes++
			token = be.token(r.val[1])
			taken = true
		default:
			reserved = reserved || r.val[0] == -2
			heldFor = append(heldFor, time.Duration(r.val[1])*time.Millisecond)
			if len(r.val) == 4 {
				redisAt, position = r.val[2], int(r.val[3])
			}
		}
	}
	if set.won(v) && time.Since(sent) < h.validity() {
		return attemptResult{ok: true, token: token, sent: sent, ttl: h.lease}, nil
	}
	if taken {
		h.mayHold = true
		if ctx.Err() == nil {
			_ = h.release(ctx, 0) // a minority or too late: let others in now
		}
	}
	if len(v.errs) > 0 && len(heldFor)+v.yes < set.need {
		return attemptResult{}, fmt.Errorf("lock: acquire %q: %w", h.key, be.failure(v))
	}
	return attemptResult{remaining: set.retryDelay(heldFor, h.c.cfg.nodeTimeoutFor(h.lease)), reserved: reserved, sent: sent, redisAt: redisAt, answered: answered, position: position}, nil
}

// acquireArgs are those of acquire.lua for a.h on each node (see
// acquireOn).
type acquireArgs struct {
	h    *hold
	n    int  // the hold count: 1 for an attempt
	wait bool // a failed attempt joins the queue
}

// acquireOn runs acquire.lua on nd (see backend.acquire).
func acquireOn(ctx context.Context, nd *node, a acquireArgs) ([]int64, error) {
	return a.h.c.be.acquire(ctx, nd, a.h, a.n, a.wait)
}

// gotKey tells a node's answer to an attempt that took the key.
func gotKey(v []int64) bool { return v[0] == 1 }

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
	if h.fixed || h.c.cfg.acks > 0 || last.redisAt == 0 || g.at < last.redisAt {
		return attemptResult{}, false
	}
	gap := time.Duration(g.at-last.redisAt) * time.Millisecond
	start := last.sent.Add(gap - gap/100)
	// Count on no more than the lease: the first renewal sets the TTL to it.
	ttl := min(claimWindow, h.lease)
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

// retryDelay is when to try again after an attempt that did not win:
// heldFor are the remaining leases of the nodes held by other owners. It
// is the time until enough of them lapse for the set's need to be free;
// when enough are free already (the vote split between contenders, or the
// one node's answer came too late), a short random delay, so contenders
// do not meet again in lockstep.
func (s *nodeSet) retryDelay(heldFor []time.Duration, timeout time.Duration) time.Duration {
	need := s.need - (len(s.nodes) - len(heldFor))
	if need <= 0 {
		return time.Millisecond + rand.N(2*timeout)
	}
	slices.Sort(heldFor)
	return heldFor[need-1]
}
