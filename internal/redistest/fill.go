package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Fill writes values to rdb, a Redis with a maxmemory and the noeviction
// policy, until it refuses even a small one with OOM, and returns the
// keys written ("fill:<size>:<n>"). It fails tb if Redis has not run out
// after 100,000 values of each size.
func Fill(tb testing.TB, rdb *redis.Client) []string {
	tb.Helper()
	ctx := context.Background()
	var keys []string
	for _, size := range []int{4096, 64} {
		value := strings.Repeat("x", size)
		for i := 0; ; i++ {
			if i == 100_000 {
				tb.Fatal("Redis never ran out of memory")
			}
			k := "fill:" + strconv.Itoa(size) + ":" + strconv.Itoa(i)
			err := rdb.Set(ctx, k, value, 0).Err()
			if redis.HasErrorPrefix(err, "OOM") {
				break
			}
			if err != nil {
				tb.Fatal(err)
			}
			keys = append(keys, k)
		}
	}
	return keys
}
