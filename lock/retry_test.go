package lock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// replayScripts is a go-redis hook that sends every script call twice, as a
// client does that retries a command whose reply was lost.
type replayScripts struct{}

func (replayScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (replayScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			_ = next(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (replayScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestRetriedCommandsChangeOneLevel(t *testing.T) {
	mr, rdb := newMini(t)
	rdb.AddHook(replayScripts{})
	c := newClient(t, rdb)
	ctx := context.Background()

	outer, unlockOuter := mustLock(t, c, ctx, "k")
	owner := ownerOf(t, mr, "k")
	if got := mr.HGet("lockkit:{k}", owner); got != "1" {
		t.Fatalf("count after replayed acquire = %s, want 1", got)
	}
	tok, _ := lock.FencingToken(outer, "k")
	if tok != 1 {
		t.Fatalf("token after replayed acquire = %d, want 1", tok)
	}
	_, unlockInner := mustLock(t, c, outer, "k")
	if got := mr.HGet("lockkit:{k}", owner); got != "2" {
		t.Fatalf("count after replayed re-entry = %s, want 2", got)
	}
	if err := unlockInner(); err != nil {
		t.Fatal(err)
	}
	if got := mr.HGet("lockkit:{k}", owner); got != "1" {
		t.Fatalf("count after replayed inner unlock = %s, want 1", got)
	}
	if err := unlockOuter(); err != nil {
		t.Fatal(err)
	}
	if mr.Exists("lockkit:{k}") {
		t.Fatal("key kept")
	}
}
