package reliability_test

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed testdata/fenced_write.lua
var fencedWriteLua string

var fencedWriteScript = redis.NewScript(fencedWriteLua)

// fencedStore is the Redis hash of the fenced store in TestProcessPause.
const fencedStore = "reliability:store"

// writeFenced writes value to the fenced store with a lock's fencing token
// and reports whether the store accepted it: it rejects a token lower than
// one it accepted before.
func writeFenced(ctx context.Context, rdb redis.Scripter, token uint64, value string) (bool, error) {
	n, err := fencedWriteScript.Run(ctx, rdb, []string{fencedStore}, token, value).Int()
	return n == 1, err
}
