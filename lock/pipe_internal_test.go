package lock

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

// evalCount counts the acquire.lua commands (13 arguments) go-redis
// sends, alone or in pipelines.
type evalCount struct{ n atomic.Int64 }

func (e *evalCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (e *evalCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		e.count(cmd)
		return next(ctx, cmd)
	}
}
func (e *evalCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			e.count(cmd)
		}
		return next(ctx, cmds)
	}
}
func (e *evalCount) count(cmd redis.Cmder) {
	if strings.HasPrefix(cmd.Name(), "eval") && len(cmd.Args()) == maxScriptArgs {
		e.n.Add(1)
	}
}

// A call whose context ends while it waits in the pipe's queue returns at
// its deadline, and the sender that takes the queue afterwards drops it
// instead of sending it. The queue is held here as if both senders were
// busy and the stall timer had not fired yet.
func TestQueuedCallWhoseContextEndedIsNotSent(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	evals := &evalCount{}
	rdb.AddHook(evals)
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := c.be.nodes().nodes[0].pipe
	p.mu.Lock()
	p.senders = maxSenders
	p.watch = time.AfterFunc(time.Hour, func() {}) // no stall sender
	p.watch.Stop()
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err = c.Lock(ctx, "queued")
	bound := 100 * time.Millisecond
	if os.Getenv("LOCKKIT_TIMING") != "1" { // as locktest.Bound, which this package's tests cannot import
		bound *= 4
	}
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > bound {
		t.Fatalf("a queued Lock with a 10 ms deadline: %v after %v, want context.DeadlineExceeded at the deadline", err, took)
	}
	p.mu.Lock()
	queued := len(p.queue) // the attempt, and the cleanup after it (a leave)
	p.mu.Unlock()
	if queued == 0 {
		t.Fatal("no call queued")
	}
	p.sendAll() // the sender that takes the queue next
	if n := evals.n.Load(); n != 0 {
		t.Errorf("the attempt was sent %d times, want never: its context had ended", n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) != 0 || p.senders != maxSenders-1 {
		t.Errorf("after the sender: %d calls queued, %d senders; want 0 and %d", len(p.queue), p.senders, maxSenders-1)
	}
}
