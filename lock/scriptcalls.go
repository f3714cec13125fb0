package lock

import (
	"context"
	"fmt"

	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// acquire runs acquire.lua: it moves h's owner to hold count n and returns
// the script's reply (see the script). With wait, a failed attempt joins
// the wait queue. A shared hold runs share.lua instead, as does a lock
// whose key turns out to have shared holds: it is the write hold of a
// read-write lock from then on.
func (nd *node) acquire(ctx context.Context, h *hold, n int, wait bool) ([]int64, error) {
	w := 0
	if wait {
		w = 1
	}
	if h.kind() == shareNone {
		v, err := nd.run(ctx, scripts.Acquire, h.rk, h.ownerArg, h.leaseArg, n, nd.claimArg, w, nd.publish).Int64Slice()
		if err != nil || v[0] != -3 {
			return replyOf(v, err)
		}
		h.turnedShared()
	}
	return replyOf(nd.run(ctx, scripts.Share, h.rk, nd.shareArgs(h, opAcquire, n, w)...).Int64Slice())
}

// replyOf checks the shape of acquire.lua's and share.lua's replies.
func replyOf(v []int64, err error) ([]int64, error) {
	if err == nil && (len(v) < 2 || len(v) > 4) {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	return v, err
}

// release runs release.lua: it moves h's owner to hold count n and reports
// whether the owner still held the key and to which waiter, if any, it was
// handed. then, unless nil, acts on the reply as soon as it comes (see
// replied). A shared hold runs share.lua, whose hand-offs are all told by
// messages, without then.
func (nd *node) release(ctx context.Context, h *hold, n int, then replied) (released, error) {
	if h.kind() == shareNone {
		r, err := parseReleased(nd.runThen(ctx, scripts.Release, h, then, h.rk, h.ownerArg, n, nd.claimArg, nd.publish, h.lingerArg))
		if !r.shared {
			return r, err
		}
		h.turnedShared()
	}
	return parseReleased(nd.run(ctx, scripts.Share, h.rk, nd.shareArgs(h, opRelease, n, 0)...))
}

// leave runs leave.lua: h's owner stopped waiting.
func (nd *node) leave(ctx context.Context, h *hold) error {
	if h.kind() == shareNone {
		v, err := nd.run(ctx, scripts.Leave, h.rk, h.ownerArg, nd.claimArg, nd.publish, h.lingerArg).Int64()
		if err != nil || v != -3 {
			return err
		}
		h.turnedShared()
	}
	return nd.run(ctx, scripts.Share, h.rk, nd.shareArgs(h, opLeave, 0, 0)...).Err()
}

// share.lua's operations (see the script).
const (
	opAcquire = "a"
	opConfirm = "c"
	opCheck   = "k"
	opRelease = "r"
	opLeave   = "l"
)

// shareArgs are the arguments of share.lua's op for h's owner at hold
// count n, wait telling (1) that a failed attempt joins the queue.
func (nd *node) shareArgs(h *hold, op string, n, wait int) []any {
	limit := h.limitArg
	if limit == nil {
		limit = 0
	}
	return []any{h.ownerArg, op, h.kind().arg(), limit, h.leaseArg, n, nd.claimArg, wait, nd.publish, h.lingerArg}
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
	cmds := nd.pipelined(ctx, len(holds), func(i int) (scripts.Script, []string, []any) {
		return nd.releaseCall(holds[i])
	})
	var shared []*hold // locks whose keys turned out to be read-write locks'
	for i, cmd := range cmds {
		if r, _ := parseReleased(cmd); r.shared {
			holds[i].turnedShared()
			shared = append(shared, holds[i])
		}
	}
	if len(shared) > 0 {
		nd.pipelined(ctx, len(shared), func(i int) (scripts.Script, []string, []any) {
			return nd.releaseCall(shared[i])
		})
	}
}

// releaseCall is the script call of h's final release.
func (nd *node) releaseCall(h *hold) (scripts.Script, []string, []any) {
	if h.kind() != shareNone {
		return scripts.Share, h.rk.keys(), nd.shareArgs(h, opRelease, 0, 0)
	}
	return scripts.Release, h.rk.keys(), []any{h.ownerArg, 0, nd.claimArg, nd.publish, h.lingerArg}
}
