package lock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// renewChunk is how many leases one renew.lua call extends on a single
// Redis. On Redis Cluster each call carries one lease (keys of different
// locks live in different slots); the pipeline still sends all calls to a
// node in one round trip.
const renewChunk = 200

// node is one Redis deployment locks are written to: a server, a
// replicated server behind one client, or a Redis Cluster. A Client has
// one node, or several independent ones in quorum mode.
type node struct {
	rdb     redis.UniversalClient
	sharded bool   // Redis Cluster: sharded pub/sub, one lease per renew call
	publish string // PUBLISH or SPUBLISH, run by release.lua
}

func newNode(rdb redis.UniversalClient) *node {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return &node{rdb: rdb, sharded: true, publish: "SPUBLISH"}
	}
	return &node{rdb: rdb, publish: "PUBLISH"}
}

// acquire runs acquire.lua: it moves h's owner to hold count n and returns
// the script's reply pair (see the script). With wait, a failed attempt
// joins the wait queue.
func (nd *node) acquire(ctx context.Context, h *hold, n int, wait bool) ([]int64, error) {
	w := 0
	if wait {
		w = 1
	}
	v, err := acquireScript.Run(ctx, nd.rdb, h.rk.scripts,
		h.owner, h.lease.Milliseconds(), n, h.c.claim, w, nd.publish).Int64Slice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	return v, err
}

// release runs release.lua: it moves h's owner to hold count n and reports
// whether the owner still held the key and which waiter, if any, was given
// the turn.
func (nd *node) release(ctx context.Context, h *hold, n int) (released, error) {
	v, err := releaseScript.Run(ctx, nd.rdb, h.rk.scripts,
		h.owner, n, h.c.claim, nd.publish).Slice()
	if err != nil {
		return released{}, err
	}
	if len(v) != 2 {
		return released{}, fmt.Errorf("unexpected reply %v", v)
	}
	next, _ := v[1].(string)
	return released{ok: v[0] == int64(1), next: next}, nil
}

// released is release.lua's reply.
type released struct {
	ok   bool   // the owner's count is at the target
	next string // the waiter given the turn, if any
}

// leave runs leave.lua: h's owner stopped waiting.
func (nd *node) leave(ctx context.Context, h *hold) error {
	return leaveScript.Run(ctx, nd.rdb, h.rk.scripts, h.owner, h.c.claim, nd.publish).Err()
}

// renew runs renew.lua over batch in one pipeline and reports, per hold,
// whether its owner still held the key.
func (nd *node) renew(ctx context.Context, batch []*hold) ([]bool, error) {
	chunk := renewChunk
	if nd.sharded {
		chunk = 1
	}
	run := func(eval bool) ([]*redis.Cmd, error) {
		pipe := nd.rdb.Pipeline()
		var cmds []*redis.Cmd
		for lo := 0; lo < len(batch); lo += chunk {
			part := batch[lo:min(lo+chunk, len(batch))]
			keys := make([]string, len(part))
			args := make([]any, 0, 2*len(part))
			for i, h := range part {
				keys[i] = h.rk.lock
				args = append(args, h.owner, h.lease.Milliseconds())
			}
			if eval {
				cmds = append(cmds, renewScript.Eval(ctx, pipe, keys, args...))
			} else {
				cmds = append(cmds, renewScript.EvalSha(ctx, pipe, keys, args...))
			}
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := run(false)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = run(true) // EVAL also caches the script for next time
	}
	if err != nil {
		return nil, err
	}
	alive := make([]bool, 0, len(batch))
	for _, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if err != nil {
			return nil, err
		}
		for _, x := range v {
			alive = append(alive, x == 1)
		}
	}
	if len(alive) != len(batch) {
		return nil, fmt.Errorf("%d replies for %d leases", len(alive), len(batch))
	}
	return alive, nil
}
