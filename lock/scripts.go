package lock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA, falling back to EVAL when Redis does not
// know them yet ([redis.Script.Run]). Those that touch the wait queue start
// with its helpers, queue.lua.
var (
	//go:embed queue.lua
	queueSrc string

	//go:embed acquire.lua
	acquireSrc    string
	acquireScript = redis.NewScript(queueSrc + acquireSrc)

	//go:embed release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(queueSrc + releaseSrc)

	//go:embed leave.lua
	leaveSrc    string
	leaveScript = redis.NewScript(queueSrc + leaveSrc)

	//go:embed renew.lua
	renewSrc    string
	renewScript = redis.NewScript(renewSrc)
)
