package lock

import (
	"context"
	"fmt"
)

// Forced tells what [Client.ForceUnlock] did.
type Forced struct {
	// Holder is the owner whose hold was ended, and Token its fencing
	// token (0 in quorum mode).
	Holder Owner
	Token  uint64
	// HandedTo is the queued waiter the lock went to, with NewToken, when
	// one was waiting (HandedTo.ID is empty otherwise).
	HandedTo Owner
	NewToken uint64
}

// forceLinger is how long the hash of a lock freed by ForceUnlock stays,
// keeping its last token.
const forceLinger = 1000 // ms

// ForceUnlock ends the current hold of key, whoever holds it, for an
// operator who decided its holder is stuck: the lock goes to the first
// live queued waiter as a release would hand it over, or is free.
//
// The old holder cannot do harm afterwards: its watchdog finds the owner
// gone at its next renewal (within a third of its lease) and cancels its
// lock context with cause [ErrLost]; its re-entries and its unlock return
// ErrLost; and the next fencing token of key (the waiter's, or that of
// the next acquisition) is larger than the old holder's, so storage that
// checks tokens rejects its late writes. Until its next renewal the old
// holder may still believe it holds the key: that is what fencing tokens
// are for. When the old holder is this Client's, its hold ends with
// ErrLost before ForceUnlock returns (package locktest's Lose uses this).
//
// Errors: [ErrNotHeld] when no one holds key (nothing changes; a lock
// taken with another prefix is not seen), [ErrInvalid] for an empty or
// oversized key, [ErrClosed] after Close, or the Redis error. In quorum
// mode the hold is ended on every node that answers (each bounded by the
// node timeout); ErrNotHeld means no node had a holder. ForceUnlock
// returns within ctx's deadline; a command still under way then goes on
// in the background.
func (c *Client) ForceUnlock(ctx context.Context, key string) (Forced, error) {
	rk, err := c.operate(key)
	if err != nil {
		return Forced{}, err
	}
	var from any = c.newOwner() // an owner of its own: r names it
	rs := fanOut(c, ctx, c.callTimeout(c.cfg.lease), func(ctx context.Context, nd *node) ([]any, error) {
		return nd.run(ctx, forceScript, rk.scriptArgs(from, c.claimArg, nd.publish, forceLinger)).Slice()
	}, nil)
	var f Forced
	var errs []error
	forced := false
	for _, r := range rs {
		switch {
		case r.err != nil:
			errs = append(errs, redisError(r.err))
		case len(r.val) >= 3 && r.val[0] == int64(1):
			forced = true
			f.Holder = ParseOwner(replyStr(r.val[1]))
			if len(c.nodes) == 1 {
				f.Token = uint64(replyInt(r.val[2]))
			}
			if len(r.val) == 5 {
				f.HandedTo, f.NewToken = ParseOwner(replyStr(r.val[3])), uint64(replyInt(r.val[4]))
			}
		}
	}
	switch {
	case forced:
		c.endOwn(f.Holder.ID)
		if len(c.nodes) > 1 {
			c.wt.released(rk, handOff{}) // this process's waiters try at once
		}
		return f, nil
	case len(errs) > 0:
		return Forced{}, fmt.Errorf("lock: force-unlock %q: %w", key, errs[0])
	}
	return Forced{}, fmt.Errorf("lock: force-unlock %q: %w: no one holds it (under prefix %q)", key, ErrNotHeld, c.cfg.prefix)
}

// endOwn ends at once this Client's hold of owner, which ForceUnlock
// took away in Redis: there is no need to wait for its next renewal.
func (c *Client) endOwn(owner string) {
	if !c.ownedBy(owner) {
		return
	}
	c.wd.mu.Lock()
	var found *hold
	for h := range c.wd.holds {
		if h.owner == owner {
			found = h
			break
		}
	}
	c.wd.mu.Unlock()
	if found != nil {
		found.mu.Lock()
		found.endLocked(ErrLost)
		found.mu.Unlock()
	}
}
