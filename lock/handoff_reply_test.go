package lock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
)

// replyFaults acts on the script calls of one lock hash: it holds back the
// next attempt to acquire it (once armed) until let is closed, closing
// held when it has it, and loses the reply of the next release (once
// armed) after Redis ran it, as a connection that broke then would.
type replyFaults struct {
	key       string
	holdBack  atomic.Bool
	held, let chan struct{}
	loseReply atomic.Bool
}

var errReplyLost = errors.New("injected: the reply was lost")

func (f *replyFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *replyFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *replyFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 4 || args[3] != f.key {
			return next(ctx, cmd)
		}
		// acquire.lua has 4 keys and 6 arguments, release.lua 4 and 5.
		switch {
		case len(args) == 13 && f.holdBack.CompareAndSwap(true, false):
			close(f.held)
			<-f.let
		case len(args) == 12 && f.loseReply.CompareAndSwap(true, false):
			if err := next(ctx, cmd); err != nil {
				return err
			}
			cmd.SetErr(errReplyLost)
			return errReplyLost
		}
		return next(ctx, cmd)
	}
}

// A release hands the key to a waiter of its own Client without a message:
// the reply tells it. When that reply is lost, the release that the
// janitor sends again finds the key handed over and names the waiter, so
// it is woken, even when it is not this process's first waiter of the key
// (waiters queue in Redis in the order their attempts arrive). Here a's
// attempt is held back, so Redis queues b before a, and the hand-off from
// w0 goes to b.
func TestLostReleaseReplyStillWakesHandedWaiter(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	f := &replyFaults{key: "lockkit:{lost-reply}", held: make(chan struct{}), let: make(chan struct{})}
	rdb.AddHook(f)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	const key = "lost-reply"
	_, unlock := locktest.MustLock(t, c, ctx, key)
	done0, w0 := lockAsync(c, ctx, key)
	waitQueued(t, rdb, key, 1)
	waitSubscribed(t, rdb, key, 1)

	f.holdBack.Store(true)
	doneA, a := lockAsync(c, ctx, key) // joins this process's queue, its attempt held back
	locktest.Within(t, f.held, 5*time.Second, "a's attempt held back")
	doneB, b := lockAsync(c, ctx, key)
	waitQueued(t, rdb, key, 2)
	close(f.let)
	waitQueued(t, rdb, key, 3)
	if q := rdb.LRange(ctx, "lockkit:{lost-reply}:queue", 0, -1).Val(); len(q) != 3 {
		t.Fatalf("queue %v", q)
	}

	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, done0, 5*time.Second, "w0")
	if w0.err != nil {
		t.Fatal(w0.err)
	}
	f.loseReply.Store(true)
	start := time.Now()
	if err := w0.unlock(); !errors.Is(err, errReplyLost) {
		t.Fatalf("w0's unlock: %v, want the injected lost reply", err)
	}
	took := locktest.Within(t, doneB, 5*time.Second, "b, the waiter w0's release handed the key to")
	t.Logf("b got the key %v after w0's release, whose reply was lost", took)
	if b.err != nil {
		t.Fatal(b.err)
	}
	if d := b.at.Sub(start); d > locktest.Bound(500*time.Millisecond) {
		t.Errorf("b got the key %v after w0's release, want within 500 ms (the janitor's release again)", d)
	}
	select {
	case <-doneA:
		t.Fatal("a, queued in Redis after b, got the key first")
	default:
	}
	if err := b.unlock(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, doneA, 5*time.Second, "a")
	if a.err != nil {
		t.Fatal(a.err)
	}
	_ = a.unlock()
}
