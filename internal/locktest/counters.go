package locktest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// CommandCounter is a go-redis hook counting the commands a client sends
// (a pipeline counts each of its commands) and the scripts (EVAL,
// EVALSHA) Redis answered.
type CommandCounter struct{ sent, scripts atomic.Int64 }

// CountCommands adds a CommandCounter to rdb: it counts from now on.
func CountCommands(rdb *redis.Client) *CommandCounter {
	cc := &CommandCounter{}
	rdb.AddHook(cc)
	return cc
}

// N returns the number of commands sent so far.
func (cc *CommandCounter) N() int64 { return cc.sent.Load() }

// Scripts returns the number of scripts Redis answered so far (sent
// alone, not in a pipeline).
func (cc *CommandCounter) Scripts() int64 { return cc.scripts.Load() }

// DialHook implements redis.Hook.
func (cc *CommandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (cc *CommandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		cc.sent.Add(1)
		err := next(ctx, cmd)
		if strings.HasPrefix(cmd.Name(), "eval") {
			cc.scripts.Add(1)
		}
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (cc *CommandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		cc.sent.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// CommandCalls returns how many times the Redis rdb talks to ran cmd
// (lower case, such as "exists"), inside scripts included, since its
// statistics were last reset (CONFIG RESETSTAT).
func CommandCalls(t testing.TB, rdb redis.Cmdable, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(info, "cmdstat_"+cmd+":calls=")
	if !ok {
		return 0
	}
	var n int
	if _, err := fmt.Sscanf(rest, "%d", &n); err != nil {
		t.Fatalf("INFO commandstats of %s: %v", cmd, err)
	}
	return n
}
