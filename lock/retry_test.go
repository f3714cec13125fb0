package lock_test

import (
	"context"
	"errors"
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

// cancelDuringCall cancels the caller's context while a script call is
// under way, as a request that ends mid-call does.
type cancelDuringCall struct{ cancel context.CancelFunc }

func (h cancelDuringCall) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h cancelDuringCall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cancel()
		return ctx.Err()
	}
}

func (h cancelDuringCall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestContextEndedDuringCall(t *testing.T) {
	mr, rdb := newMini(t)
	ctx, cancel := context.WithCancel(context.Background())
	rdb.AddHook(cancelDuringCall{cancel})
	c := newClient(t, rdb)
	_, _, err := c.Lock(ctx, "k")
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock = %v, want ErrNotObtained joined with context.Canceled", err)
	}
	if len(mr.Keys()) != 0 {
		t.Fatalf("keys left: %v", mr.Keys())
	}
}
