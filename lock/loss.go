package lock

import "time"

// Loss tells why a lease was lost (see [Release]).
type Loss int

// Reasons of a loss.
const (
	LossNone       Loss = iota // the lease was not lost
	LossKeyGone                // Redis no longer had the owner: the key expired, was deleted or taken over
	LossNotRenewed             // the validity ran out before a renewal was confirmed (Redis slow or unreachable)
)

var lossNames = [...]string{"none", "key_gone", "not_renewed"}

// String returns the reason's lower-case name, e.g. "key_gone".
func (l Loss) String() string {
	if l < 0 || int(l) >= len(lossNames) {
		return "unknown"
	}
	return lossNames[l]
}

// loseLocked ends the hold with ErrLost for reason (see endLocked).
func (h *hold) loseLocked(reason Loss) {
	if h.loss == LossNone { // the first reason found stays
		h.loss = reason
	}
	h.endLocked(ErrLost)
}

// lossOf is the Loss of a level that ended with cause; h.mu is held.
func (h *hold) lossOf(cause error) Loss {
	if cause != ErrLost {
		return LossNone
	}
	return h.loss
}

// checkValidityLocked ends the hold with ErrLost when its validity has run
// out, in case the watchdog has not ended it yet.
func (h *hold) checkValidityLocked() {
	if h.end == nil && !time.Now().Before(h.validUntil) {
		h.loseLocked(LossNotRenewed)
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

// live reports whether the hold has not ended and its validity has not
// run out.
func (h *hold) live() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkValidityLocked()
	return h.end == nil
}
