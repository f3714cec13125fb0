package lock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/health"
	"github.com/lockkit/lockkit/lock/internal/pipe"
	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// node is one Redis deployment locks are written to: a server, a
// replicated server behind one client, or a Redis Cluster. The single
// backend has one node, the quorum backend several independent ones.
type node struct {
	rdb     redis.UniversalClient
	sharded bool // Redis Cluster: sharded pub/sub, one lease per renew call
	publish any  // "PUBLISH" or "SPUBLISH", run by release.lua

	acks       int // replicas that must confirm each write (WithReplicaAck); 0: none
	ackTimeout time.Duration
	policy     atomic.Pointer[string] // maxmemory-policy read at New; nil if unknown (see checkEviction)

	// Concurrent script calls share round trips (see pipe.Pipe). Nil on Redis
	// Cluster, where a pipeline would wait for every master it reaches;
	// with WithReplicaAck, whose WAIT follows each write on its
	// connection; and in the quorum backend, where a node's command goes on
	// after the call returned at the majority's answer (see
	// quorum.lateGrant).
	pipe *pipe.Pipe[*hold]

	// claimArg is the claim window of the key's wait queue in ms, boxed
	// once for script calls: 0 where the backend keeps no queue.
	claimArg any

	// health is tracked by the quorum backend, which skips a node that
	// failed repeatedly (see health.Tracker); nil: the node is always called.
	health *health.Tracker
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

// run runs s on the keys rk with the arguments argv (see scripts.Script.Do);
// with WithReplicaAck it sends WAIT after it on the same connection, in
// the same round trip, and fails the command with ErrReplicaAck when too
// few replicas confirm.
func (nd *node) run(ctx context.Context, s scripts.Script, rk redisKeys, argv ...any) *redis.Cmd {
	return nd.runThen(ctx, s, nil, nil, rk, argv...)
}

// A replied acts on the reply of a script call for a hold as soon as it
// comes (see pipe.Replied).
type replied = pipe.Replied[*hold]

// runThen is run, with then called on the reply (see replied) unless it
// is nil.
func (nd *node) runThen(ctx context.Context, s scripts.Script, h *hold, then replied, rk redisKeys, argv ...any) *redis.Cmd {
	if nd.pipe != nil {
		return cutAtDeadline(ctx, nd.pipe.Run(ctx, s, h, then, rk.args, argv))
	}
	cmd := nd.send(ctx, s, rk.scriptArgs(argv...))
	if then != nil {
		signal(then(h, cmd))
	}
	return cutAtDeadline(ctx, cmd)
}

// cutAtDeadline is cmd, or, when it failed once ctx's deadline had
// passed, a command failed with ctx's error. With ContextTimeoutEnabled
// go-redis stops a call at the deadline through the socket's, which may
// fire a moment before the context's own timer; callers tell a call that
// its context cut off from a Redis error by ctx.Err(), so it waits for
// that timer (briefly: the deadline has passed, or passes within a
// millisecond).
func cutAtDeadline(ctx context.Context, cmd *redis.Cmd) *redis.Cmd {
	if cmd.Err() == nil {
		return cmd
	}
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil && time.Until(d) < time.Millisecond {
		t := time.NewTimer(deadlineSettle)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if err := ctx.Err(); err != nil && !errors.Is(cmd.Err(), err) {
		failed := redis.NewCmd(ctx)
		failed.SetErr(err)
		return failed
	}
	return cmd
}

// deadlineSettle bounds how long cutAtDeadline waits for a context whose
// deadline has passed to say so: its timer may run late on a loaded
// machine (by more than 10 ms under the race detector at load 10).
const deadlineSettle = 100 * time.Millisecond

// send sends a script call with args (see scripts.Script.Do) itself, for a node
// without a pipe.
func (nd *node) send(ctx context.Context, s scripts.Script, args []any) *redis.Cmd {
	if nd.acks == 0 {
		return s.Do(ctx, nd.rdb, args)
	}
	var cmd *redis.Cmd
	for _, eval := range []bool{false, true} {
		s.Command(args, eval)
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

// pipelined runs n script calls in one pipeline, each with the script,
// keys and arguments call returns for it, and returns the commands, each
// with its own reply or error. It uses EVALSHA and, when Redis does not
// know a script, runs the commands that failed so once more with EVAL,
// which also caches it.
func (nd *node) pipelined(ctx context.Context, n int, call func(i int) (scripts.Script, []string, []any)) []*redis.Cmd {
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
