package lock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA, falling back to EVAL when Redis does not
// know them yet ([redis.Script.Run]).
var (
	//go:embed acquire.lua
	acquireSrc    string
	acquireScript = redis.NewScript(acquireSrc)

	//go:embed release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(releaseSrc)

	//go:embed renew.lua
	renewSrc    string
	renewScript = redis.NewScript(renewSrc)
)
