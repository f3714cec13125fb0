package lock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// acquire runs acquire.lua: it moves h's owner to hold count n and returns
// the script's reply (see the script). With wait, a failed attempt joins
// the wait queue.
func (nd *node) acquire(ctx context.Context, h *hold, n int, wait bool) ([]int64, error) {
	w := 0
	if wait {
		w = 1
	}
	v, err := nd.run(ctx, acquireScript, h.rk, h.ownerArg, h.leaseArg, n, h.c.claimArg, w, nd.publish).Int64Slice()
	if err == nil && (len(v) < 2 || len(v) > 4) {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	return v, err
}

// release runs release.lua: it moves h's owner to hold count n and reports
// whether the owner still held the key and to which waiter, if any, it was
// handed.
//
// A final release on the one node acts on its reply as soon as it comes
// (see releaseReplied).
func (nd *node) release(ctx context.Context, h *hold, n int) (released, error) {
	var then replied
	if n == 0 && len(h.c.nodes) == 1 {
		then = releaseReplied
	}
	return parseReleased(nd.runThen(ctx, releaseScript, h, then, h.rk, h.ownerArg, n, h.c.claimArg, nd.publish, h.lingerArg))
}

// releaseReplied acts on the reply of a final release on the one node as
// soon as it comes (see replied): it has a hand-off to another Client's
// waiter checked after the claim window, before the releasing caller
// could close the Client, and returns the wake channel of this process's
// waiter the key was handed to, which no message tells; when the release
// failed (it may have run, its reply lost), that of this process's first
// waiter of the key, which tries (see release.lua).
func releaseReplied(h *hold, cmd *redis.Cmd) chan struct{} {
	c := h.c
	r, err := parseReleased(cmd)
	switch {
	case r.ok: // it ran (with an error: too few replicas confirmed it)
		if r.next.owner != "" && !c.ownedBy(r.next.owner) {
			c.wt.checkLater(h)
		}
		return c.wt.toWake(h.rk, r.next)
	case err != nil:
		return c.wt.toWake(h.rk, handOff{})
	}
	return nil
}

// leave runs leave.lua: h's owner stopped waiting.
func (nd *node) leave(ctx context.Context, h *hold) error {
	return nd.run(ctx, leaveScript, h.rk, h.ownerArg, h.c.claimArg, nd.publish, h.lingerArg).Err()
}

// Modes of acquire.lua besides an attempt: a confirmation sets the lease
// of an owner in place; a check drops waiters that missed their turn; a
// watch has every Client with a queued waiter check a hand-off. None takes
// the lock.
const (
	confirm   = 2
	checkMode = 3
	watchMode = 4
)

// releaseAll releases every hold of holds to count 0 in one pipeline,
// best effort (Close).
func (nd *node) releaseAll(ctx context.Context, holds []*hold) {
	for _, h := range holds {
		h.releasing.Store(true)
	}
	nd.pipelined(ctx, len(holds), func(i int) (script, []string, []any) {
		h := holds[i]
		return releaseScript, h.rk.keys(), []any{h.ownerArg, 0, h.c.claimArg, nd.publish, h.lingerArg}
	})
}
