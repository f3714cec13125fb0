package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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

	acks       int // replicas that must confirm each write (WithReplicaAck); 0: none
	ackTimeout time.Duration
	policy     atomic.Pointer[string] // maxmemory-policy read at New; nil if unknown (see checkEviction)

	// Concurrent script calls share round trips (see pipe). Nil on Redis
	// Cluster, where a pipeline would wait for every master it reaches;
	// with WithReplicaAck, whose WAIT follows each write on its
	// connection; and in quorum mode, where a node's command goes on after
	// the call returned at the majority's answer (see hold.lateGrant).
	pipe *pipe

	// Quorum mode: a node that failed failLimit times in a row is not
	// called until skipUntil, then once, as a probe (see available).
	mu        sync.Mutex
	fails     int
	skipUntil time.Time
}

// failLimit failures in a row make a quorum node be skipped for
// downBackoff, after which one call probes it.
const (
	failLimit   = 3
	downBackoff = time.Second
)

// available reports whether a call should be sent to the node: not while
// it is skipped after repeated failures, except for one probe each
// downBackoff.
func (nd *node) available() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.fails < failLimit {
		return true
	}
	now := time.Now()
	if now.Before(nd.skipUntil) {
		return false
	}
	nd.skipUntil = now.Add(downBackoff) // this call probes it
	return true
}

// observe records the outcome of a call: an error that is not Redis's
// reply (no answer in time, no connection) counts as a failure of the
// node; anything else makes it healthy again.
func (nd *node) observe(err error) {
	var re redis.Error
	failed := err != nil && !errors.As(err, &re)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !failed {
		nd.fails = 0
		return
	}
	if nd.fails++; nd.fails == failLimit {
		nd.skipUntil = time.Now().Add(downBackoff)
	}
}

func newNode(rdb redis.UniversalClient, cfg config) (*node, error) {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		if cfg.acks > 0 {
			return nil, invalidf("WithReplicaAck with a redis.ClusterClient: WAIT would reach one node of the cluster, not the one of each key")
		}
		return &node{rdb: rdb, sharded: true, publish: "SPUBLISH"}, nil
	}
	return &node{rdb: rdb, publish: "PUBLISH", acks: cfg.acks, ackTimeout: cfg.ackTimeout}, nil
}

// run runs s on the keys rk with the arguments argv (see script.run);
// with WithReplicaAck it sends WAIT after it on the same connection, in
// the same round trip, and fails the command with ErrReplicaAck when too
// few replicas confirm.
func (nd *node) run(ctx context.Context, s script, rk redisKeys, argv ...any) *redis.Cmd {
	return nd.runThen(ctx, s, nil, nil, rk, argv...)
}

// A replied acts on the reply of a script call for hold h as soon as it
// comes, in the goroutine that reads it (a sender of the pipe, or the
// call's own), before the caller sees it, and even when the caller has
// stopped waiting. It returns the wake channel of a waiter to signal, or
// nil, which is signalled just after the caller is told: Go's scheduler
// runs the goroutine made ready last first, so the waiter a release hands
// the key to runs before the releasing caller goes on, and releases
// sooner. Waking it before telling the caller cost a contended acquisition
// 6% more time (BenchmarkContended, 8 runs alternated, benchstat: 105.4
// against 99.4 µs).
type replied func(h *hold, cmd *redis.Cmd) chan struct{}

// runThen is run, with then called on the reply (see replied) unless it
// is nil.
func (nd *node) runThen(ctx context.Context, s script, h *hold, then replied, rk redisKeys, argv ...any) *redis.Cmd {
	if nd.pipe != nil {
		return nd.pipe.run(ctx, s, h, then, rk, argv)
	}
	cmd := nd.send(ctx, s, rk.scriptArgs(argv...))
	if then != nil {
		signal(then(h, cmd))
	}
	return cmd
}

// send sends a script call with args (see script.run) itself, for a node
// without a pipe.
func (nd *node) send(ctx context.Context, s script, args []any) *redis.Cmd {
	if nd.acks == 0 {
		return s.run(ctx, nd.rdb, args)
	}
	var cmd *redis.Cmd
	for _, eval := range []bool{false, true} {
		args[0], args[1] = "evalsha", s.sha
		if eval {
			args[0], args[1] = "eval", s.src
		}
		pipe := nd.rdb.Pipeline()
		cmd = redis.NewCmd(ctx, args...)
		_ = pipe.Process(ctx, cmd)
		wait := nd.wait(ctx, pipe)
		_, _ = pipe.Exec(ctx)
		if err := cmd.Err(); eval || err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			nd.checkAck(cmd, wait)
			break
		}
	}
	return cmd
}

// wait queues WAIT on pipe: the replicas that confirmed the connection's
// writes so far, waiting up to the timeout of WithReplicaAck.
func (nd *node) wait(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, "wait", nd.acks, nd.ackTimeout.Milliseconds())
	_ = pipe.Process(ctx, cmd)
	return cmd
}

// checkAck fails cmd, if it succeeded, when wait, the WAIT after it, saw
// fewer replicas confirm than asked for.
func (nd *node) checkAck(cmd *redis.Cmd, wait *redis.IntCmd) {
	if cmd.Err() != nil {
		return
	}
	if n, err := wait.Result(); err != nil || n < int64(nd.acks) {
		cmd.SetErr(fmt.Errorf("%w: %d of %d replicas within %v (%v)", ErrReplicaAck, n, nd.acks, nd.ackTimeout, err))
	}
}

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

// parseReleased reads release.lua's reply. With WithReplicaAck a release
// the replicas did not confirm fails with ErrReplicaAck, but still
// reports what the script did (it ran on the primary), so that a waiter
// it handed the key to is woken.
func parseReleased(cmd *redis.Cmd) (released, error) {
	v, err := cmd.Slice()
	if errors.Is(err, ErrReplicaAck) {
		v, _ = cmd.Val().([]any)
	}
	if v == nil {
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
	return r, err
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
	return nd.run(ctx, leaveScript, h.rk, h.ownerArg, h.c.claimArg, nd.publish, h.lingerArg).Err()
}

// leaseState is what a renewal learned of one lease: whether its owner
// still held the key, or the error of its command.
type leaseState struct {
	alive bool
	err   error
}

// renew runs renew.lua over batch in one pipeline and reports, per hold,
// whether its owner still held the key. A hold the key was handed to
// confirms with acquire.lua instead, which also takes it out of the wait
// queue (see queue.lua). A failed command fails only the leases it
// carried.
func (nd *node) renew(ctx context.Context, batch []*hold) []leaseState {
	chunk := renewChunk
	if nd.sharded {
		chunk = 1
	}
	var parts [][]*hold // one command each; the confirmations first
	var renewed []*hold
	for _, h := range batch {
		if h.handed.Load() {
			parts = append(parts, []*hold{h})
		} else {
			renewed = append(renewed, h)
		}
	}
	confirms := len(parts)
	for lo := 0; lo < len(renewed); lo += chunk {
		parts = append(parts, renewed[lo:min(lo+chunk, len(renewed))])
	}
	cmds := nd.pipelined(ctx, len(parts), func(i int) (script, []string, []any) {
		if i < confirms {
			h := parts[i][0]
			return acquireScript, h.rk.keys(), []any{h.ownerArg, h.leaseArg, 1, h.c.claimArg, confirm, nd.publish}
		}
		keys := make([]string, len(parts[i]))
		args := make([]any, 0, 2*len(parts[i]))
		for j, h := range parts[i] {
			keys[j] = h.rk.lock
			args = append(args, h.ownerArg, h.leaseArg)
		}
		return renewScript, keys, args
	})
	states := make(map[*hold]leaseState, len(batch))
	for i, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if i < confirms && err == nil && len(v) == 2 {
			v = v[:1] // {1, token} when confirmed, {-1, 0} when gone
		}
		if err == nil && len(v) != len(parts[i]) {
			err = fmt.Errorf("%d replies for %d leases", len(v), len(parts[i]))
		}
		for j, h := range parts[i] {
			if err != nil {
				states[h] = leaseState{err: err}
			} else {
				states[h] = leaseState{alive: v[j] == 1}
			}
		}
	}
	ordered := make([]leaseState, len(batch))
	for i, h := range batch {
		ordered[i] = states[h]
	}
	return ordered
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

// pipelined runs n script calls in one pipeline, each with the script,
// keys and arguments call returns for it, and returns the commands, each
// with its own reply or error. It uses EVALSHA and, when Redis does not
// know a script, runs the commands that failed so once more with EVAL,
// which also caches it.
func (nd *node) pipelined(ctx context.Context, n int, call func(i int) (script, []string, []any)) []*redis.Cmd {
	send := func(idx []int, eval bool) []*redis.Cmd {
		pipe := nd.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(idx))
		for j, i := range idx {
			s, keys, a := call(i)
			if eval {
				cmds[j] = s.Eval(ctx, pipe, keys, a...)
			} else {
				cmds[j] = s.EvalSha(ctx, pipe, keys, a...)
			}
		}
		var wait *redis.IntCmd
		if nd.acks > 0 {
			wait = nd.wait(ctx, pipe)
		}
		_, _ = pipe.Exec(ctx) // each command keeps its own error
		if wait != nil {
			for _, cmd := range cmds {
				nd.checkAck(cmd, wait)
			}
		}
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
