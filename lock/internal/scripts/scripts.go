// Package scripts holds the lock's Lua scripts, assembled and loaded
// once, and runs them with EVALSHA. Each script's header says its keys,
// arguments and reply.
package scripts

import (
	"context"
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA, falling back to EVAL when Redis does not
// know them yet. Those that touch the wait queue get its helpers,
// queue.lua, where their queue part begins, and the fencing token's,
// token.lua, before (see withQueue).
var (
	//go:embed token.lua
	tokenSrc string
	//go:embed queue.lua
	queueSrc string

	//go:embed acquire.lua
	acquireSrc string
	// Acquire takes, re-enters or confirms a lock, or checks a hand-off.
	Acquire = newScript(withQueue(acquireSrc))

	//go:embed release.lua
	releaseSrc string
	// Release releases hold levels of an owner and, at zero, hands the key
	// to the next waiter.
	Release = newScript(withQueue(releaseSrc))

	//go:embed leave.lua
	leaveSrc string
	// Leave takes a waiter that stopped waiting out of the wait queue.
	Leave = newScript(withQueue(leaveSrc))

	//go:embed force.lua
	forceSrc string
	// Force ends the hold on a lock, whoever its owner.
	Force = newScript(withQueue(forceSrc))

	//go:embed share.lua
	shareSrc string
	// Share takes, confirms, checks, releases and leaves holds that
	// several owners share: permits and read and write holds.
	Share = newScript(withQueue(shareSrc))

	//go:embed inspect.lua
	inspectSrc string
	// Inspect reads a lock and its wait queue.
	Inspect = newScript(inspectSrc)

	//go:embed renew.lua
	renewSrc string
	// Renew extends the leases of held locks, each while its owner holds it.
	Renew = newScript(renewSrc)
)

// queueMark and tokenMark are the lines of a script where queue.lua's and
// token.lua's helpers go: after the common cases that need none, which
// return before Lua defines them (each definition costs every call that
// runs it).
const (
	queueMark = "--[[queue.lua]]\n"
	tokenMark = "--[[token.lua]]\n"
)

// withQueue returns src with token.lua and queue.lua in place of their
// marks; it panics when src lacks one.
func withQueue(src string) string {
	return insert(insert(src, tokenMark, tokenSrc), queueMark, queueSrc)
}

// insert returns src with part in place of its line mark.
func insert(src, mark, part string) string {
	before, after, ok := strings.Cut(src, mark)
	if !ok {
		panic("scripts: a script that uses the queue has no " + mark)
	}
	return before + part + after
}

// A Script is a Lua script of the lock, its hash and source boxed once,
// so that a call allocates no more than its arguments.
type Script struct {
	*redis.Script     // EvalSha and Eval in pipelines, Run with its keys
	sha, src      any // boxed
}

func newScript(src string) Script {
	s := redis.NewScript(src)
	return Script{Script: s, sha: s.Hash(), src: src}
}

// Command fills the first two of args, a script call's "EVALSHA", the
// hash, the number of keys, the keys and the arguments: "evalsha" and the
// hash, or with eval "eval" and the source.
func (s Script) Command(args []any, eval bool) {
	if eval {
		args[0], args[1] = "eval", s.src
		return
	}
	args[0], args[1] = "evalsha", s.sha
}

// Do sends the script as one command: args is "EVALSHA", the hash, the
// number of keys, the keys and the arguments, with its first two left for
// Do to fill. When Redis does not know the script it is sent again with
// EVAL, which also caches it.
func (s Script) Do(ctx context.Context, rdb redis.UniversalClient, args []any) *redis.Cmd {
	s.Command(args, false)
	cmd := redis.NewCmd(ctx, args...)
	_ = rdb.Process(ctx, cmd)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		s.Command(args, true)
		cmd = redis.NewCmd(ctx, args...)
		_ = rdb.Process(ctx, cmd)
	}
	return cmd
}
