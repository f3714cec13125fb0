package lock

import (
	"context"
	"sync"
	"time"
)

const (
	// janitorRetry is how often the janitor tries again to clean up after
	// owners while Redis does not confirm it.
	janitorRetry = 200 * time.Millisecond

	// settle is how long after Redis first confirmed an owner's cleanup the
	// janitor cleans up once more. A stalled Redis runs the commands its
	// connections hold as soon as it resumes, in no set order: an attempt
	// cut off by its caller's deadline may run after the first cleanup,
	// never after the second.
	settle = 250 * time.Millisecond

	// cleanupTimeout bounds one cleanup call.
	cleanupTimeout = time.Second
)

// janitor makes sure that owners nobody will use neither hold their key
// nor wait in its queue: an attempt or a wait cut short by the caller's
// deadline (its command may still run in Redis, late), an acquisition that
// reached only a minority or came too late, an unlock Redis did not
// confirm in time. It is one goroutine per Client, which retries until
// Redis confirmed the cleanup twice, settle apart, so that such an owner
// blocks no key for longer than one claim window after Redis answers
// again. At Close it waits for the calls Close ended to hand it what they
// owe Redis (a waiter's leaving the queue), and goes on with what is
// pending (an attempt Close cut off, say) until Close's deadline, then
// stops; Close waits for it.
type janitor struct {
	c       *Client
	mu      sync.Mutex
	pending map[*hold]*chore
	stopped bool          // run has returned: cleanups run on their own
	kick    chan struct{} // capacity 1
}

// chore is the cleanup of one abandoned owner.
type chore struct {
	mayHold   bool          // the owner may hold the key: release it, and confirm twice
	confirmed time.Time     // when Redis first confirmed it; zero before
	done      chan struct{} // closed then
}

func newJanitor(c *Client) *janitor {
	return &janitor{c: c, pending: make(map[*hold]*chore), kick: make(chan struct{}, 1)}
}

// abandon hands h's owner to the janitor and waits up to wait for Redis to
// confirm the first cleanup, so that in the common case the caller returns
// with the key and queue already cleaned. mayHold tells that the owner may
// hold the key, or come to hold it when a command still under way runs;
// otherwise it is only taken out of the wait queue.
func (j *janitor) abandon(h *hold, mayHold bool, wait time.Duration) {
	if !mayHold && !h.c.be.queued() {
		return // no queue to leave
	}
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		go cleanOnce(h, mayHold)
		return
	}
	ch := j.pending[h]
	if ch == nil {
		ch = &chore{done: make(chan struct{})}
		j.pending[h] = ch
	}
	ch.mayHold = ch.mayHold || mayHold
	j.mu.Unlock()
	signal(j.kick)
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch.done:
	case <-t.C:
	case <-j.c.life.Done():
	}
}

func (j *janitor) run() {
	defer j.stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	life := j.c.life.Done()
	var closing <-chan time.Time
	for {
		select {
		case <-life:
			life = nil
			t := time.NewTimer(time.Until(j.c.closeBy))
			defer t.Stop()
			closing = t.C
		case <-closing:
			return
		case <-j.kick:
		case <-retry.C:
		}
		if j.sweep() {
			retry.Reset(janitorRetry)
		} else if life == nil && !j.c.callsUnderWay() {
			return // closed, nothing left, and no call that Close ended still to hand over its cleanup
		}
	}
}

// stop hands what is still pending, and what comes later (an acquisition
// Close could not cut off, finishing after it), to cleanOnce.
func (j *janitor) stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopped = true
	for h, ch := range j.pending {
		if ch.confirmed.IsZero() {
			go cleanOnce(h, ch.mayHold)
		}
	}
	clear(j.pending)
}

// cleanOnce is a cleanup after the janitor stopped: one try, bounded by
// cleanupTimeout and the Redis client's own timeouts; if it fails, a key
// the owner may hold lapses with its lease.
func cleanOnce(h *hold, mayHold bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.c.life), cleanupTimeout)
	defer cancel()
	h.clean(ctx, mayHold)
}

// sweep runs the cleanups that are due and reports whether any is left.
// It stops at the first that Redis does not confirm: the others would wait
// for the same Redis.
func (j *janitor) sweep() bool {
	j.mu.Lock()
	due := make(map[*hold]*chore, len(j.pending))
	for h, ch := range j.pending {
		if ch.confirmed.IsZero() || time.Since(ch.confirmed) >= settle {
			due[h] = ch
		}
	}
	j.mu.Unlock()
	for h, ch := range due {
		j.mu.Lock()
		mayHold := ch.mayHold
		j.mu.Unlock()
		deadline := time.Now().Add(cleanupTimeout)
		if j.c.isClosed() {
			deadline = j.c.closeBy
		}
		ctx, cancel := context.WithDeadline(context.WithoutCancel(j.c.life), deadline)
		ok := h.clean(ctx, mayHold)
		cancel()
		if !ok {
			break
		}
		j.mu.Lock()
		switch {
		case ch.confirmed.IsZero():
			ch.confirmed = time.Now()
			close(ch.done)
			if !ch.mayHold {
				delete(j.pending, h)
			}
		case time.Since(ch.confirmed) >= settle:
			delete(j.pending, h)
		}
		j.mu.Unlock()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) > 0
}

// clean takes h's owner out of the key's wait queue, passing on a turn it
// had, and with mayHold releases its hold on the key, if any. It reports
// whether enough nodes answered to know that the owner blocks nothing (the
// one node, or a majority).
func (h *hold) clean(ctx context.Context, mayHold bool) bool {
	if mayHold && !h.c.be.nodes().settled(h.releaseVotes(ctx, 0)) {
		return false
	}
	return h.c.be.leave(ctx, h)
}
