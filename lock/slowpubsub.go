package lock

import "time"

// Slow pub/sub. A hand-off message that reaches this process more than
// slowMessage (a tenth of a window) after Redis sent it, by the clock
// offset its waiters' attempts measured, shows a slow subscription: every
// hand-off between processes then waits that long, and one later than the
// claim window lapses. For slowFor (ten windows) after such a message, the
// first waiter of each key in this Client tries every slowPoll (a tenth of
// a window) as well as when told, so it finds a key handed to it by
// command. A healthy subscription delivers in well under slowMessage, and
// nothing polls. docs/operations.md ("Slow pub/sub") has the figures.
const (
	slowMessage = claimWindow / 10
	slowPoll    = claimWindow / 10
	slowFor     = 10 * claimWindow
)

// sawClock notes the clock offset an attempt's reply showed, counted
// from when the reply came: Redis ran the attempt before that, so the
// offset is a lower bound, and a message never counts as later than it
// was. Counted from when the attempt was sent, a Redis that stalled with
// the attempt on its way (or a slow command connection) made every later
// message, delivered at once, count as late by the stall.
func (w *waiters) sawClock(res attemptResult) {
	if res.redisAt == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.offset, w.offsetSet = res.redisAt-res.answered.UnixMilli(), true
}

// retryIn is when me, q's waiter, tries again without a message: when its
// last attempt said (see retryAfter), and in slow-pub/sub mode, as this
// Client's first waiter of the key, within slowPoll.
func (w *waiters) retryIn(q *queue, me *waiter, remaining time.Duration) time.Duration {
	d := retryAfter(remaining)
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Now().Before(w.slowUntil) && q.list[0] == me {
		d = min(d, slowPoll)
	}
	return d
}

// noteMessage notes a hand-off told at Redis's time at (ms): one that
// arrives more than slowMessage late turns slow-pub/sub mode on (see
// slowMessage). Called with w.mu held.
func (w *waiters) noteMessage(at int64) {
	if !w.offsetSet || at == 0 {
		return
	}
	if late := time.Now().UnixMilli() - (at - w.offset); time.Duration(late)*time.Millisecond > slowMessage {
		w.slowUntil = time.Now().Add(slowFor)
	}
}
