package lock

import (
	"context"
	"fmt"

	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// acquire runs acquire.lua: it moves h's owner to hold count n and returns
// the script's reply (see the script). With wait, a failed attempt joins
// the wait queue.
func (nd *node) acquire(ctx context.Context, h *hold, n int, wait bool) ([]int64, error) {
	w := 0
	if wait {
		w = 1
	}
	v, err := nd.run(ctx, scripts.Acquire, h.rk, h.ownerArg, h.leaseArg, n, nd.claimArg, w, nd.publish).Int64Slice()
	if err == nil && (len(v) < 2 || len(v) > 4) {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	return v, err
}

// release runs release.lua: it moves h's owner to hold count n and reports
// whether the owner still held the key and to which waiter, if any, it was
// handed. then, unless nil, acts on the reply as soon as it comes (see
// replied).
func (nd *node) release(ctx context.Context, h *hold, n int, then replied) (released, error) {
	return parseReleased(nd.runThen(ctx, scripts.Release, h, then, h.rk, h.ownerArg, n, nd.claimArg, nd.publish, h.lingerArg))
}

// leave runs leave.lua: h's owner stopped waiting.
func (nd *node) leave(ctx context.Context, h *hold) error {
	return nd.run(ctx, scripts.Leave, h.rk, h.ownerArg, nd.claimArg, nd.publish, h.lingerArg).Err()
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
	nd.pipelined(ctx, len(holds), func(i int) (scripts.Script, []string, []any) {
		h := holds[i]
		return scripts.Release, h.rk.keys(), []any{h.ownerArg, 0, nd.claimArg, nd.publish, h.lingerArg}
	})
}
