package lock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Retried commands: a command go-redis sends again changes one level, and
// a retried release after a takeover is no loss.

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

// dropFirstReleaseReply runs the first outermost release, lets another
// owner take the key, and then acts as if the reply had been lost, so that
// the retry meets a key that is someone else's.
type dropFirstReleaseReply struct {
	between func()
	done    bool
}

func (h *dropFirstReleaseReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *dropFirstReleaseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args() // eval(sha) script 4 lock queue waits channel owner n claim publish linger
		if err == nil && !h.done && strings.HasPrefix(cmd.Name(), "eval") && len(args) == 12 && fmt.Sprint(args[8]) == "0" {
			h.done = true
			h.between()
			return next(ctx, cmd) // the retry
		}
		return err
	}
}

func (h *dropFirstReleaseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestRetriedCommandsChangeOneLevel(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	rdb.AddHook(replayScripts{})
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()

	outer, unlockOuter := locktest.MustLock(t, c, ctx, "k")
	if got := countOf(t, mr, "k"); got != "1" {
		t.Fatalf("count after replayed acquire = %s, want 1", got)
	}
	// The replay handed out no second token: the holder's is the last.
	tok, _ := lock.FencingToken(outer, "k")
	if last := mr.HGet("lockkit:{k}", "t"); last != strconv.FormatUint(tok, 10) {
		t.Fatalf("token after replayed acquire = %d, last handed out %s: want the same", tok, last)
	}
	_, unlockInner := locktest.MustLock(t, c, outer, "k")
	if got := countOf(t, mr, "k"); got != "2" {
		t.Fatalf("count after replayed re-entry = %s, want 2", got)
	}
	if err := unlockInner(); err != nil {
		t.Fatal(err)
	}
	if got := countOf(t, mr, "k"); got != "1" {
		t.Fatalf("count after replayed inner unlock = %s, want 1", got)
	}
	if err := unlockOuter(); err != nil {
		t.Fatal(err)
	}
	if locktest.Held(t, rdb, "lockkit:{k}") {
		t.Fatal("key kept")
	}
}

func TestRetriedReleaseAfterTakeoverIsNoLoss(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	b := locktest.NewClient(t, redis.NewClient(&redis.Options{Addr: mr.Addr}))
	ctx := context.Background()
	var unlockB lock.UnlockFunc
	rdb.AddHook(&dropFirstReleaseReply{between: func() {
		var err error
		if _, unlockB, err = b.TryLock(ctx, "k"); err != nil {
			t.Errorf("takeover after the release: %v", err)
		}
	}})
	a := locktest.NewClient(t, rdb)
	_, unlock := locktest.MustLock(t, a, ctx, "k")
	if err := unlock(); err != nil {
		t.Fatalf("unlock whose retry met the next owner = %v, want nil", err)
	}
	if unlockB == nil {
		t.Fatal("the hook did not run")
	}
	if err := unlockB(); err != nil {
		t.Fatalf("the next owner lost its lock: %v", err)
	}
}
