package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
)

// fillQueue queues, behind a free key's hash, dead waiters of dead
// distinct Clients (deadline passed) and then live ones of live distinct
// Clients, with one pipeline.
func fillQueue(t *testing.T, rdb *redis.Client, key string, dead, live int) {
	t.Helper()
	ctx := context.Background()
	base := "lockkit:{" + key + "}"
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	pipe := rdb.Pipeline()
	for i := range dead {
		o := fmt.Sprintf("dead%d:1", i)
		pipe.RPush(ctx, base+":queue", o)
		pipe.HSet(ctx, base+":waits", o, now.Add(-time.Second).UnixMilli())
	}
	for i := range live {
		o := fmt.Sprintf("live%d:1", i)
		pipe.RPush(ctx, base+":queue", o)
		pipe.HSet(ctx, base+":waits", o, now.Add(time.Minute).UnixMilli())
	}
	pipe.PExpire(ctx, base+":queue", time.Minute)
	pipe.PExpire(ctx, base+":waits", time.Minute)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// slowestScript is how long Redis ran the slowest command since reset,
// by SLOWLOG (threshold 0).
func slowestScript(t *testing.T, rdb *redis.Client) time.Duration {
	t.Helper()
	ctx := context.Background()
	entries, err := rdb.SlowLogGet(ctx, 128).Result()
	if err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for _, e := range entries {
		if len(e.Args) > 0 && (e.Args[0] == "evalsha" || e.Args[0] == "EVALSHA" || e.Args[0] == "eval" || e.Args[0] == "EVAL") {
			worst = max(worst, e.Duration)
		}
	}
	return worst
}

// Very long queues. The turn a missed hand-off starts is announced to
// every Client with a queued waiter (announce: LRANGE of the whole queue,
// one PUBLISH per Client): with 20 000 Clients queued the script still
// runs in well under 250 ms (it blocks all of Redis meanwhile). Dropping
// the waiters of Clients that missed their turn (first, run by any attempt
// and by the releasing Client's check) must not cost an LRANGE of the
// whole queue per dead Client: 3000 processes killed together (one waiter
// each) once made one script block Redis for about a second.
func TestLongQueueScriptTime(t *testing.T) {
	locktest.Timed(t)
	for _, tc := range []struct {
		name       string
		dead, live int
	}{
		{"announce to 20000 Clients", 1, 20000},
		{"drop 3000 dead Clients", 3000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := newReal(t)
			ctx := context.Background()
			c := locktest.NewClient(t, rdb)
			key := "ho-long"
			fillQueue(t, rdb, key, tc.dead, tc.live)
			if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.SlowLogReset(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			_, _, err := c.TryLock(ctx, key) // the attempt that drops them and announces the turn
			d := slowestScript(t, rdb)
			left := rdb.LLen(ctx, "lockkit:{"+key+"}:queue").Val()
			t.Logf("%d dead + %d live Clients queued: TryLock = %v; acquire.lua ran %v in Redis; %d left queued", tc.dead, tc.live, err, d, left)
			if left != int64(tc.live) {
				t.Fatalf("%d waiters left queued, want %d", left, tc.live)
			}
			if d > locktest.Bound(250*time.Millisecond) {
				t.Errorf("one acquire.lua blocked Redis for %v (%d dead Clients at the front, %d live behind)", d, tc.dead, tc.live)
			}
		})
	}
}
