package lock

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
