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
	sharded bool // Redis Cluster: sharded pub/sub, one lease per renew call
	publish any  // "PUBLISH" or "SPUBLISH", run by release.lua
}

func newNode(rdb redis.UniversalClient) *node {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return &node{rdb: rdb, sharded: true, publish: "SPUBLISH"}
	}
	return &node{rdb: rdb, publish: "PUBLISH"}
}

// acquire runs acquire.lua: it moves h's owner to hold count n and returns
// the script's reply (see the script). With wait, a failed attempt joins
// the wait queue.
func (nd *node) acquire(ctx context.Context, h *hold, n int, wait bool) ([]int64, error) {
	w := 0
	if wait {
		w = 1
	}
	v, err := acquireScript.run(ctx, nd.rdb, h.rk.scriptArgs(h.ownerArg, h.leaseArg, n, h.c.claimArg, w, nd.publish)).Int64Slice()
	if err == nil && len(v) != 2 && len(v) != 3 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	return v, err
}

// release runs release.lua: it moves h's owner to hold count n and reports
// whether the owner still held the key and to which waiter, if any, it was
// handed.
func (nd *node) release(ctx context.Context, h *hold, n int) (released, error) {
	v, err := releaseScript.run(ctx, nd.rdb, h.rk.scriptArgs(h.ownerArg, n, h.c.claimArg, nd.publish, h.lingerArg)).Slice()
	if err != nil {
		return released{}, err
	}
	r := released{ok: len(v) > 0 && v[0] == int64(1)}
	switch len(v) {
	case 1:
	case 4:
		r.next.owner, _ = v[1].(string)
		r.next.token, _ = v[2].(int64)
		r.next.at, _ = v[3].(int64)
	default:
		return released{}, fmt.Errorf("unexpected reply %v", v)
	}
	return r, nil
}

// released is release.lua's reply.
type released struct {
	ok   bool    // the owner's count is at the target
	next handOff // the waiter the key was handed to, if any
}

// A handOff tells that a release gave the key to a queued waiter, owner,
// with token, at Redis's time at (ms), for the claim window.
type handOff struct {
	owner string
	token int64
	at    int64
}

// leave runs leave.lua: h's owner stopped waiting.
func (nd *node) leave(ctx context.Context, h *hold) error {
	return leaveScript.run(ctx, nd.rdb, h.rk.scriptArgs(h.ownerArg, h.c.claimArg, nd.publish, h.lingerArg)).Err()
}

// leaseState is what a renewal learned of one lease: whether its owner
// still held the key, or the error of its command.
type leaseState struct {
	alive bool
	err   error
}

// renew runs renew.lua over batch in one pipeline and reports, per hold,
// whether its owner still held the key. A failed command fails only the
// leases it carried.
func (nd *node) renew(ctx context.Context, batch []*hold) []leaseState {
	chunk := renewChunk
	if nd.sharded {
		chunk = 1
	}
	var parts [][]*hold
	for lo := 0; lo < len(batch); lo += chunk {
		parts = append(parts, batch[lo:min(lo+chunk, len(batch))])
	}
	cmds := nd.pipelined(ctx, renewScript, len(parts), func(i int) ([]string, []any) {
		keys := make([]string, len(parts[i]))
		args := make([]any, 0, 2*len(parts[i]))
		for j, h := range parts[i] {
			keys[j] = h.rk.lock
			args = append(args, h.ownerArg, h.leaseArg)
		}
		return keys, args
	})
	states := make([]leaseState, 0, len(batch))
	for i, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if err == nil && len(v) != len(parts[i]) {
			err = fmt.Errorf("%d replies for %d leases", len(v), len(parts[i]))
		}
		for j := range parts[i] {
			if err != nil {
				states = append(states, leaseState{err: err})
			} else {
				states = append(states, leaseState{alive: v[j] == 1})
			}
		}
	}
	return states
}

// releaseAll releases every hold of holds to count 0 in one pipeline,
// best effort (Close).
func (nd *node) releaseAll(ctx context.Context, holds []*hold) {
	nd.pipelined(ctx, releaseScript, len(holds), func(i int) ([]string, []any) {
		h := holds[i]
		return h.rk.keys(), []any{h.ownerArg, 0, h.c.claimArg, nd.publish, h.lingerArg}
	})
}

// pipelined runs script n times in one pipeline, with the keys and
// arguments args returns for each, and returns the commands, each with its
// own reply or error. It uses EVALSHA and, when Redis does not know the
// script, runs the commands that failed so once more with EVAL, which also
// caches it.
func (nd *node) pipelined(ctx context.Context, s script, n int, args func(i int) ([]string, []any)) []*redis.Cmd {
	send := func(idx []int, eval bool) []*redis.Cmd {
		pipe := nd.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(idx))
		for j, i := range idx {
			keys, a := args(i)
			if eval {
				cmds[j] = s.Eval(ctx, pipe, keys, a...)
			} else {
				cmds[j] = s.EvalSha(ctx, pipe, keys, a...)
			}
		}
		_, _ = pipe.Exec(ctx) // each command keeps its own error
		return cmds
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	cmds := send(all, false)
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		for j, cmd := range send(again, true) {
			cmds[again[j]] = cmd
		}
	}
	return cmds
}

// groups splits batch by the Redis server that serves each lease: on Redis
// Cluster one group per master, so that a master down or stuck delays only
// the leases it serves; elsewhere one group.
func (c *Client) groups(ctx context.Context, batch []*hold) [][]*hold {
	cc, ok := c.nodes[0].rdb.(*redis.ClusterClient)
	if !ok || len(c.nodes) > 1 {
		return [][]*hold{batch}
	}
	by := make(map[string][]*hold)
	var order []string
	for _, h := range batch {
		addr := "" // unknown: one group of its own
		if m, err := cc.MasterForKey(ctx, h.rk.lock); err == nil {
			addr = m.Options().Addr
		}
		if by[addr] == nil {
			order = append(order, addr)
		}
		by[addr] = append(by[addr], h)
	}
	groups := make([][]*hold, len(order))
	for i, addr := range order {
		groups[i] = by[addr]
	}
	return groups
}
