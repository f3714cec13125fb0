package scripts

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

// Keys and arguments as a Client sends them: the lock of key "bench" with
// the default prefix, a labelled owner of the usual length (see clientID
// in lock/owner.go), the default lease and claim window, a 1 s linger.
var (
	costKeys  = []any{"lockkit:{bench}", "lockkit:{bench}:queue", "lockkit:{bench}:waits", "lockkit:{bench}:released"}
	costOwner = "AAAAAAAAAAAAAAAAAAAAAA@payments-worker-5d8f7c9b4-x2x7q:12345:payments-7f9c:1"
	costOther = "BBBBBBBBBBBBBBBBBBBBBB@payments-worker-5d8f7c9b4-x2x7q:12345:payments-7f9c:1"
)

const (
	costLease  = 8000
	costClaim  = 400
	costLinger = 1000
)

// A costCase is one common call of a script: reset puts the lock in the
// state the call finds (with plain commands, counted apart from the
// script's), call makes it, and its reply, printed, begins with want.
type costCase struct {
	name  string
	reset func(ctx context.Context, rdb *redis.Client) int // commands sent
	call  func(ctx context.Context, rdb *redis.Client) (any, error)
	want  string
}

// script returns a call of s with the lock's keys and argv.
func script(s Script, argv ...any) func(context.Context, *redis.Client) (any, error) {
	return func(ctx context.Context, rdb *redis.Client) (any, error) {
		args := append(append([]any{"", "", len(costKeys)}, costKeys...), argv...)
		return s.Do(ctx, rdb, args).Result()
	}
}

// held writes the hash of a lock owner holds n times.
func held(n int) func(context.Context, *redis.Client) int {
	return func(ctx context.Context, rdb *redis.Client) int {
		rdb.HSet(ctx, "lockkit:{bench}", "o", costOwner, "n", n, "t", 1000)
		rdb.PExpire(ctx, "lockkit:{bench}", costLease*time.Millisecond)
		return 2
	}
}

// costCases are the common calls of the lock's scripts.
func costCases() []costCase {
	acquire := script(Acquire, costOwner, costLease, 1, costClaim, 1, "PUBLISH")
	return []costCase{
		{"acquire/free-hash", func(ctx context.Context, rdb *redis.Client) int {
			rdb.HSet(ctx, "lockkit:{bench}", "o", costOther, "n", 0, "t", 1000, "r", costOther)
			return 1
		}, acquire, "[1 1001]"},
		{"acquire/no-hash", func(ctx context.Context, rdb *redis.Client) int {
			rdb.Del(ctx, "lockkit:{bench}")
			return 1
		}, acquire, "[1 "}, // a token from Redis's clock
		{"acquire/reentry", held(1), script(Acquire, costOwner, costLease, 2, costClaim, 1, "PUBLISH"), "[2 1000]"},
		{"release/last", held(1), script(Release, costOwner, 0, costClaim, "PUBLISH", costLinger), "[1]"},
		{"release/inner", held(2), script(Release, costOwner, 1, costClaim, "PUBLISH", costLinger), "[1]"},
		{"renew/1", held(1), renewCall(1), "[1]"},
		{"renew/100", func(ctx context.Context, rdb *redis.Client) int {
			for i := range 100 {
				rdb.HSet(ctx, "lockkit:{bench}:"+strconv.Itoa(i), "o", costOwner, "n", 1, "t", 1000)
			}
			return 100
		}, renewCall(100), "[1 1 1 "},
	}
}

// renewCall renews n locks of costOwner: "lockkit:{bench}" alone, or
// "lockkit:{bench}:0" and on.
func renewCall(n int) func(context.Context, *redis.Client) (any, error) {
	args := []any{"", "", n}
	if n == 1 {
		args = append(args, "lockkit:{bench}")
	} else {
		for i := range n {
			args = append(args, "lockkit:{bench}:"+strconv.Itoa(i))
		}
	}
	for range n {
		args = append(args, costOwner, costLease)
	}
	return func(ctx context.Context, rdb *redis.Client) (any, error) {
		return Renew.Do(ctx, rdb, append([]any(nil), args...)).Result()
	}
}

// The references: what a lock with a plain key costs.
var (
	refObtain = newScript(`if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then return 1 end return 0`)
	refCAD    = newScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
)

func refCases() []costCase {
	del := func(ctx context.Context, rdb *redis.Client) int { rdb.Del(ctx, "ref"); return 1 }
	set := func(ctx context.Context, rdb *redis.Client) int { rdb.Set(ctx, "ref", costOwner, 0); return 1 }
	return []costCase{
		{"ref/set-nx-px", del, func(ctx context.Context, rdb *redis.Client) (any, error) {
			return rdb.SetNX(ctx, "ref", costOwner, costLease*time.Millisecond).Result()
		}, "true"},
		{"ref/obtain-script", del, func(ctx context.Context, rdb *redis.Client) (any, error) {
			return refObtain.Do(ctx, rdb, []any{"", "", 1, "ref", costOwner, costLease}).Result()
		}, "1"},
		{"ref/compare-and-delete", set, func(ctx context.Context, rdb *redis.Client) (any, error) {
			return refCAD.Do(ctx, rdb, []any{"", "", 1, "ref", costOwner}).Result()
		}, "1"},
	}
}

// commandStats reads INFO commandstats: calls and usec per command.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string][2]int64, error) {
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	m := make(map[string][2]int64)
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec int64
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		m[strings.TrimPrefix(name, "cmdstat_")] = [2]int64{calls, usec}
	}
	return m, nil
}

// BenchmarkScriptCost measures, per common call of a script and for the
// references, Redis's own time per call (redis-µs/op, from INFO
// commandstats: the usec of the script's EVALSHA or of the command) and
// the commands a script sends (rcalls/op: redis.calls); under callgrind
// (see callgrind) also the instructions of a script call (redis-Ir/op).
// Run it with a fixed count, for instance
//
//	go test -run '^$' -bench ScriptCost -benchtime 20000x ./lock/internal/scripts
func BenchmarkScriptCost(b *testing.B) {
	cg := callgrindFromEnv()
	var rdb *redis.Client
	if cg != nil {
		rdb = redis.NewClient(&redis.Options{Addr: os.Getenv("LOCKKIT_REDIS_ADDR")})
		b.Cleanup(func() { _ = rdb.Close() })
	} else {
		rdb = redistest.Start(b).Client(b)
	}
	ctx := context.Background()
	for _, c := range append(costCases(), refCases()...) {
		b.Run(c.name, func(b *testing.B) {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			// Warm up: the script is cached, the reply as expected.
			c.reset(ctx, rdb)
			if v, err := c.call(ctx, rdb); err != nil || !strings.HasPrefix(fmt.Sprint(v), c.want) {
				b.Fatalf("reply %v, %v; want %s...", v, err, c.want)
			}
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			if cg != nil {
				if err := cg.zero(); err != nil {
					b.Fatal(err)
				}
			}
			resets := 0
			for b.Loop() {
				b.StopTimer()
				resets += c.reset(ctx, rdb)
				b.StartTimer()
				if _, err := c.call(ctx, rdb); err != nil {
					b.Fatal(err)
				}
			}
			if cg != nil {
				ir, err := cg.dump()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(ir)/float64(b.N), "redis-Ir/op")
			}
			st, err := commandStats(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			reportCost(b, st, resets)
		})
	}
}

// reportCost reports the measured command's usec per call and, for a
// script, the commands it sent per call: every call counted but the
// script's, the resets and CONFIG RESETSTAT.
func reportCost(b *testing.B, st map[string][2]int64, resets int) {
	main := "evalsha"
	if _, ok := st[main]; !ok {
		main = "set"
	}
	calls, usec := st[main][0], st[main][1]
	var total int64
	for _, v := range st {
		total += v[0]
	}
	inner := total - st[main][0] - int64(resets) - 1
	if calls <= 0 {
		b.Fatalf("no %s counted: %v", main, st)
	}
	b.ReportMetric(float64(usec)/float64(calls), "redis-µs/op")
	b.ReportMetric(float64(inner)/float64(calls), "rcalls/op")
	if testing.Verbose() {
		fmt.Println(b.Name(), st)
	}
}
