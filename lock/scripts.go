package lock

import (
	"context"
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA, falling back to EVAL when Redis does not
// know them yet. Those that touch the wait queue get its helpers,
// queue.lua, where their queue part begins (see withQueue).
var (
	//go:embed queue.lua
	queueSrc string

	//go:embed acquire.lua
	acquireSrc    string
	acquireScript = newScript(withQueue(acquireSrc))

	//go:embed release.lua
	releaseSrc    string
	releaseScript = newScript(withQueue(releaseSrc))

	//go:embed leave.lua
	leaveSrc    string
	leaveScript = newScript(withQueue(leaveSrc))

	//go:embed force.lua
	forceSrc    string
	forceScript = newScript(withQueue(forceSrc))

	//go:embed inspect.lua
	inspectSrc    string
	inspectScript = newScript(inspectSrc)

	//go:embed renew.lua
	renewSrc    string
	renewScript = newScript(renewSrc)
)

// queueMark is the line of a script where queue.lua's helpers go: after
// the common cases, which return before Lua defines them (each definition
// costs every call that runs it).
const queueMark = "--[[queue.lua]]\n"

// withQueue returns src with queue.lua in place of its queueMark.
func withQueue(src string) string {
	before, after, ok := strings.Cut(src, queueMark)
	if !ok {
		panic("lock: a script that uses the queue has no " + queueMark)
	}
	return before + queueSrc + after
}

// A script is a Lua script of the lock, its hash and source boxed once, so
// that a call allocates no more than its arguments.
type script struct {
	*redis.Script     // for pipelines
	sha, src      any // boxed
}

func newScript(src string) script {
	s := redis.NewScript(src)
	return script{Script: s, sha: s.Hash(), src: src}
}

// run sends the script as one command: args is "EVALSHA", the hash, the
// number of keys, the keys and the arguments, with its first two left for
// run to fill. When Redis does not know the script it is sent again with
// EVAL, which also caches it.
func (s script) run(ctx context.Context, rdb redis.UniversalClient, args []any) *redis.Cmd {
	args[0], args[1] = "evalsha", s.sha
	cmd := redis.NewCmd(ctx, args...)
	_ = rdb.Process(ctx, cmd)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, args...)
		_ = rdb.Process(ctx, cmd)
	}
	return cmd
}
