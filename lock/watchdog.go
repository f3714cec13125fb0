package lock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// watchdog is the one renewal loop of a Client. It also keeps the registry
// of live holds, so Close can end them, and ends each hold whose validity
// runs out before a renewal extends it: one timer serves every hold.
//
// The loop never waits for Redis: it sends each batch of due leases from a
// goroutine of its own (one per master on Redis Cluster) and moves on, so
// a stuck connection or a dead master delays only the leases it serves. A
// lease whose renewal failed is sent again a quarter of an interval after
// that renewal was sent, until its validity ends; one whose renewal is
// still unanswered a whole interval after it was sent (a stuck
// connection) is sent again then, on whatever connection is free. Never
// sooner: a batch that is slow because Redis or this process is short of
// CPU must not be sent again while it runs, which would multiply the work
// that made it slow (20,000 leases of 3 s in one Client under three busy
// loops on two cores: up to six batches of all of them in flight at once,
// and every lease lost; TestWatchdogKeepsManyLeasesUnderCPULoad).
type watchdog struct {
	c      *Client
	mu     sync.Mutex
	holds  map[*hold]schedule // live holds
	closed bool
	wake   *time.Timer // runs the loop at wakeAt
	wakeAt time.Time   // zero: wake is not armed
}

// schedule is what the watchdog does next for a hold: renew its lease at
// renew and, unless a renewal extends it first, end it with ErrLost at
// valid, when its validity runs out. A zero time means nothing to do.
// sent is when the renewal under way was sent; zero when none is.
type schedule struct {
	renew, valid, sent time.Time
}

func newWatchdog(c *Client) *watchdog {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &watchdog{c: c, holds: make(map[*hold]schedule), wake: t}
}

// armLocked makes the loop run at at, unless it runs sooner already. It
// only resets a timer, and seldom: a new hold is due after those taken
// before it with the same lease.
func (w *watchdog) armLocked(at time.Time) {
	if !at.IsZero() && (w.wakeAt.IsZero() || at.Before(w.wakeAt)) {
		w.wakeAt = at
		w.wake.Reset(time.Until(at))
	}
}

// interval is how often a lease is renewed: a third of it, so two more
// renewals can fail before the validity ends. A hold the key was handed to
// has the claim window's TTL until its first renewal: a third of that.
func interval(h *hold) time.Duration {
	if h.handed.Load() {
		return min(h.lease, claimWindow) / 3
	}
	return h.lease / 3
}

// add registers a hold whose lease was set at sent and whose validity
// ends at valid. It reports false when the Client is closed.
func (w *watchdog) add(h *hold, sent, valid time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	s := schedule{valid: valid}
	if !h.fixed {
		s.renew = sent.Add(interval(h))
	}
	w.holds[h] = s
	w.armLocked(s.first())
	return true
}

// first is the earlier of the schedule's times that are set.
func (s schedule) first() time.Time {
	if s.renew.IsZero() || (!s.valid.IsZero() && s.valid.Before(s.renew)) {
		return s.valid
	}
	return s.renew
}

// extended moves the end of h's validity to valid, after a renewal.
func (w *watchdog) extended(h *hold, valid time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.holds[h]; ok {
		s.valid = valid
		w.holds[h] = s
		w.armLocked(valid)
	}
}

func (w *watchdog) remove(h *hold) {
	w.mu.Lock()
	delete(w.holds, h)
	w.mu.Unlock()
}

// closeAll ends every live hold with ErrClosed and returns them.
func (w *watchdog) closeAll() []*hold {
	w.mu.Lock()
	w.closed = true
	holds := make([]*hold, 0, len(w.holds))
	for h := range w.holds {
		holds = append(holds, h)
	}
	w.mu.Unlock()
	for _, h := range holds {
		h.mu.Lock()
		h.endLocked(ErrClosed)
		h.mu.Unlock()
	}
	return holds
}

func (w *watchdog) run() {
	defer w.wake.Stop()
	for {
		select {
		case <-w.c.life.Done():
			return
		case <-w.wake.C:
		}
		batch, expired := w.due(time.Now())
		if len(batch) > 0 {
			w.c.tasks.Run(func() { w.renew(batch) })
		}
		if len(expired) > 0 {
			w.c.tasks.Run(func() {
				for _, h := range expired {
					h.expire()
				}
			})
		}
	}
}

// due returns the holds to renew now and those whose validity has run
// out, and arms the loop for the next ones. A lease due within an eighth
// of its interval is renewed with the batch, so holds taken at different
// moments share round trips. Each hold in the batch is due again an
// interval later unless its renewal is answered before (see settled). A
// hold whose validity has run out is not renewed with the others. Holds
// whose outermost caller's context is done are no longer renewed; their
// validity still ends.
func (w *watchdog) due(now time.Time) (batch, expired []*hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next time.Time
	for h, s := range w.holds {
		ending := !s.valid.IsZero() && !now.Before(s.valid)
		if ending {
			expired = append(expired, h)
			s.valid = time.Time{} // set again if a renewal extends it meanwhile
		}
		if !s.renew.IsZero() && h.parent.Err() != nil {
			s.renew = time.Time{}
		}
		if !s.renew.IsZero() && s.renew.Sub(now) <= interval(h)/8 {
			// An ending hold's validity would end the batch's wait at once.
			if !ending {
				batch = append(batch, h)
				s.sent = now
			}
			s.renew = now.Add(interval(h))
		}
		w.holds[h] = s
		if at := s.first(); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	w.wakeAt = time.Time{}
	if !next.IsZero() {
		w.armLocked(next)
	}
	return batch, expired
}

// renew extends the leases of batch: one goroutine per group of leases
// served by one Redis server.
func (w *watchdog) renew(batch []*hold) {
	groups := w.c.be.groups(w.c.life, batch)
	for _, g := range groups[1:] {
		w.c.tasks.Run(func() { w.renewGroup(g) })
	}
	w.renewGroup(groups[0])
}

// renewGroup extends the leases of batch with one pipeline per node. A
// lease is renewed when the backend's need of nodes (the one node, or a
// majority) confirms it, and lost when so many no longer have its owner
// that no more can.
func (w *watchdog) renewGroup(batch []*hold) {
	c := w.c
	set := c.be.nodes()
	sent := w.sentAt(batch)
	// A confirmation is worth waiting for until the last validity in the
	// batch ends: a hold whose validity ends before its answer comes is
	// ended by the loop meanwhile (and a late confirmation does not revive
	// it), but the others in the batch must not lose theirs for it. Each
	// node also has the backend's timeout, the shortest of the batch's, if
	// any (see backend.timeout).
	var deadline time.Time
	var timeout time.Duration
	for _, h := range batch {
		h.mu.Lock()
		if h.validUntil.After(deadline) {
			deadline = h.validUntil
		}
		h.mu.Unlock()
		if t := c.be.timeout(h.lease); t > 0 && (timeout == 0 || t < timeout) {
			timeout = t
		}
	}
	ctx, cancel := context.WithDeadline(c.life, deadline)
	rs := fanOut(set, ctx, timeout, func(ctx context.Context, nd *node) ([]leaseState, error) {
		return nd.renew(ctx, batch), nil
	}, nil)
	cancel()
	var firstErr error
	lost := 0
	for i, h := range batch {
		var v votes
		for _, r := range rs {
			err := r.err
			if err == nil {
				err = r.val[i].err
			}
			switch {
			case err != nil:
				v.errs = append(v.errs, err)
			case r.val[i].alive:
				v.yes++
			default:
				v.no++
			}
		}
		if firstErr == nil && len(v.errs) > 0 {
			firstErr = errors.Join(v.errs...)
		}
		switch {
		case set.won(v):
			h.renewed(sent, true)
			w.settled(h, sent, true)
		case set.lost(v):
			if h.renewed(sent, false) { // not when it was unlocked meanwhile
				lost++
			}
		default:
			w.settled(h, sent, false)
		}
	}
	if o := c.cfg.observer; o != nil {
		o.Renewed(Renewal{Leases: len(batch), Lost: lost, Err: firstErr, Duration: time.Since(sent)})
	}
}

// sentAt is when due sent batch: the time it noted for its holds.
func (w *watchdog) sentAt(batch []*hold) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range batch {
		if s, ok := w.holds[h]; ok && !s.sent.IsZero() {
			return s.sent
		}
	}
	return time.Now()
}

// settled records the answer to h's renewal sent at sent: h is due again
// an interval after sent when it was renewed (unless a newer renewal was
// confirmed first and it is due later already), a quarter of an interval
// after sent when the renewal failed.
func (w *watchdog) settled(h *hold, sent time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, live := w.holds[h]
	if !live || s.renew.IsZero() {
		return
	}
	if s.sent.Equal(sent) {
		s.sent = time.Time{}
	}
	at := sent.Add(interval(h))
	switch {
	case ok && s.renew.Before(at):
		s.renew = at
	case !ok && s.sent.IsZero():
		s.renew = sent.Add(interval(h) / 4)
	}
	w.holds[h] = s
	w.armLocked(s.renew)
}
