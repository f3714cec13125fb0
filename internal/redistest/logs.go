package redistest

import (
	"context"
	"os"

	"github.com/redis/go-redis/v9"
)

// QuietLogs silences go-redis's own logger (the connection errors it
// retries, pool messages) for the test binary, unless LOCKKIT_REDIS_LOG=1.
// Tests make Redis fail on purpose, and its lines would bury the
// tests' own output. Call it first in TestMain.
func QuietLogs() {
	if os.Getenv("LOCKKIT_REDIS_LOG") != "1" {
		redis.SetLogger(quiet{})
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
