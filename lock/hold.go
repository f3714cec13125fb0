package lock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A hold is one owner's possession of one key: the outermost acquisition
// and every re-entry into it. Its hold levels are the live acquisitions;
// their number is the hold count kept in Redis.
type hold struct {
	c      *Client
	key    string
	rk     redisKeys
	owner  string
	lease  time.Duration
	fixed  bool            // no watchdog
	parent context.Context // the outermost caller's; renewal stops when it is done
	token  uint64
	// Script arguments, boxed once: the owner, the lease and the linger
	// time in ms (see linger).
	ownerArg, leaseArg, lingerArg any
	handed                        atomic.Bool // the key was handed over, with the claim window's TTL, and the holder has yet to confirm
	// share is the hold's shareKind: shareNone for a lock, which becomes
	// shareWrite when its key turns out to be a read-write lock's (see
	// node.acquire); limit is a semaphore's, limitArg it boxed.
	share    atomic.Uint32
	limit    int
	limitArg any
	// releasing is set before the owner's final release is sent (see
	// quorum.lateGrant).
	releasing atomic.Bool

	// mayHold tells that an attempt that did not succeed may have taken
	// the key on some node (a minority, too late, or cut off): if the call
	// gives up, the janitor must release the owner. Only the acquiring
	// goroutine uses it.
	mayHold bool

	mu         sync.Mutex // guards what follows; never held over a Redis call
	levels     []*level   // live levels, outermost first; in room while one
	room       [1]*level  // levels' first array: a hold without re-entries allocates none
	outer      level      // the outermost level: it costs no allocation of its own
	end        error      // nil while held; then errDone, ErrLost or ErrClosed
	loss       Loss       // why, when end is ErrLost
	validUntil time.Time  // the watchdog ends the hold with ErrLost then

	// The hold count's changes in Redis are one caller's at a time (see
	// lockOps): opsBusy while one is under way; opsFreed, made by the first
	// caller that waits for it, is closed when it ends.
	opsBusy  bool
	opsFreed chan struct{}
}

func (c *Client) newHold(parent context.Context, key string, lc lockConfig) *hold {
	if lc.untilUnlock {
		parent = context.WithoutCancel(parent) // renewed until unlock
	}
	owner := c.newOwner(lc.internal)
	h := &hold{
		c:         c,
		key:       key,
		rk:        c.keys.get(key),
		owner:     owner,
		ownerArg:  owner,
		leaseArg:  c.leaseArg,
		lingerArg: c.lingerArg,
		lease:     lc.lease,
		fixed:     lc.fixed,
		parent:    parent,
	}
	h.levels = h.room[:0]
	if lc.kind != shareNone {
		h.share.Store(uint32(lc.kind))
		h.limit, h.limitArg = lc.limit, lc.limit
	}
	if lc.lease != c.cfg.lease {
		h.leaseArg, h.lingerArg = leaseArgs(lc.lease)
	}
	return h
}

// kind is the hold's shareKind.
func (h *hold) kind() shareKind { return shareKind(h.share.Load()) }

// turnedShared notes that h, a lock, found its key a read-write lock's
// (a script answered -3): h is that key's write hold from then on.
func (h *hold) turnedShared() { h.share.CompareAndSwap(uint32(shareNone), uint32(shareWrite)) }

// leaseArgs returns a lease and its linger time in ms, boxed for script
// calls: how long Redis keeps the hash of the key after the last release,
// the lease, at most a second.
func leaseArgs(lease time.Duration) (leaseArg, lingerArg any) {
	return lease.Milliseconds(), min(lease, time.Second).Milliseconds()
}

// lockOps waits until the hold count is this caller's to change in Redis,
// or until ctx is done (a command of the hold stuck in a stalled Redis
// must not hold other callers past their deadlines); it reports which.
// Callers of lockOps must not hold h.mu.
func (h *hold) lockOps(ctx context.Context) bool {
	for {
		h.mu.Lock()
		if !h.opsBusy {
			h.opsBusy = true
			h.mu.Unlock()
			return true
		}
		if h.opsFreed == nil {
			h.opsFreed = make(chan struct{})
		}
		freed := h.opsFreed
		h.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// unlockOps ends what lockOps began, and wakes the callers waiting for
// it. Its caller must not hold h.mu.
func (h *hold) unlockOps() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opsBusy = false
	if h.opsFreed != nil {
		close(h.opsFreed)
		h.opsFreed = nil
	}
}

// validity is how long after sending a command that set the lease the
// holder may count on it: the lease less the drift allowance.
func (h *hold) validity() time.Duration {
	return h.lease - h.c.cfg.driftFor(h.lease)
}

// endLocked ends the hold with cause: its lease is no longer renewed, and
// the contexts of its live levels are cancelled with cause.
func (h *hold) endLocked(cause error) {
	if h.end != nil {
		return
	}
	h.end = cause
	h.c.wd.remove(h)
	if cause != errDone {
		h.c.wt.released(h.rk, handOff{}) // an unlock wakes them once Redis released
	}
	for _, l := range h.levels {
		h.c.reportRelease(l, cause) // first, so the observer is done when ctx is
		l.cancel(cause)
	}
}
