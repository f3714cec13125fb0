package lock

import (
	"context"
	"time"

	"github.com/lockkit/lockkit/lock/internal/janitor"
	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// checkLater has h's key checked just after the claim window, with
// acquire.lua's check mode: h's release handed it to another Client's
// waiter, whose process may be dead. Every other Client learns of no
// hand-off but its own, so only this one, alive at the release, is sure to
// notice one that was never confirmed; the check then gives the next
// waiter its turn. A receiver whose Client took the message keeps its
// place half a window longer (see hand_off in queue.lua), and a turn the
// check started may be missed too: while the first waiter's turn or place
// is still on, the key is checked again when it ends (see checkIn). A
// check Redis did not answer is made again (see checkRetry). One check at
// a time per key. nd is the node h's release ran on.
func (w *waiters) checkLater(nd *node, h *hold) {
	w.checkIn(&pendingCheck{nd: nd, rk: h.rk, lease: h.leaseArg}, claimWindow+checkMargin)
}

// checkMargin is how long after a turn or place ends a check runs.
const checkMargin = 5 * time.Millisecond

// A check Redis did not answer (a lost command, a connection gone
// half-open, a restart) is made again after checkRetry, for checkRetryFor
// after the first that failed: the waiters the check would give a turn
// may have been told nothing else, and sleep until a lease they were
// told of long ago.
const (
	checkRetry    = claimWindow / 10
	checkRetryFor = 10 * claimWindow
)

// checkIn has pc's key checked in d, and again while the check finds a
// waiter's turn or place that ends within a window and a half (a hand-off
// or a turn; not a waiter queued behind a held lease), or gets no answer.
func (w *waiters) checkIn(pc *pendingCheck, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.checks[pc.rk.lock] != nil {
		return
	}
	pc.timer = time.AfterFunc(d, func() {
		w.mu.Lock()
		delete(w.checks, pc.rk.lock)
		w.mu.Unlock()
		w.c.tasks.Run(func() {
			again, err := w.c.check(pc.nd, pc.rk, pc.lease)
			switch {
			case err != nil:
				if pc.failing.IsZero() {
					pc.failing = time.Now()
				}
				if time.Since(pc.failing) < checkRetryFor {
					w.checkIn(pc, checkRetry)
				}
			case again > 0 && again <= claimWindow+claimWindow/2:
				pc.failing = time.Time{}
				w.checkIn(pc, again+checkMargin)
			}
		})
	})
	w.checks[pc.rk.lock] = pc
}

// A pendingCheck is a check after a hand-off that is not due yet.
type pendingCheck struct {
	timer   *time.Timer
	nd      *node
	rk      redisKeys
	lease   any
	failing time.Time // since when Redis answered none of this key's checks; zero while it does
}

// check runs acquire.lua's check mode on rk's key on nd, bounded by
// janitor.CleanupTimeout, and returns when the first waiter's turn or place ends
// (0: the key is held, or nobody waits), or the error of a check Redis did
// not answer.
func (c *Client) check(nd *node, rk redisKeys, lease any) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(c.life, janitor.CleanupTimeout)
	defer cancel()
	owner := c.newOwner(false)
	v, err := nd.run(ctx, scripts.Acquire, rk, owner, lease, 1, nd.claimArg, checkMode, nd.publish).Int64Slice()
	if err == nil && len(v) == 2 && v[0] == -3 { // shared holds: share.lua hands free room on
		return 0, nd.run(ctx, scripts.Share, rk, owner, opCheck, "p", 0, lease, 1, nd.claimArg, 0, nd.publish, lease).Err()
	}
	if err != nil || len(v) < 2 {
		return 0, err
	}
	return time.Duration(v[1]) * time.Millisecond, nil
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
		nd.pipelined(ctx, len(pending), func(i int) (scripts.Script, []string, []any) {
			pc := pending[i]
			return scripts.Acquire, pc.rk.keys(), []any{c.newOwner(false), pc.lease, 1, nd.claimArg, watchMode, nd.publish}
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
