package pipe

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
	"github.com/lockkit/lockkit/lock/internal/scripts"
	"github.com/lockkit/lockkit/lock/internal/tasks"
)

// evalCount counts the script commands go-redis sends, alone or in
// pipelines.
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
	if strings.HasPrefix(cmd.Name(), "eval") {
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
	run := tasks.New()
	t.Cleanup(func() { run.Close(time.Second) })
	p := New[int](rdb, run, context.Background())
	p.mu.Lock()
	p.senders = maxSenders
	p.watch = time.AfterFunc(time.Hour, func() {}) // no stall sender
	p.watch.Stop()
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := p.Run(ctx, scripts.Renew, 0, nil, []any{"", "", 1, "queued"}, []any{"owner", 1000}).Err()
	bound := 100 * time.Millisecond
	if os.Getenv("LOCKKIT_TIMING") != "1" { // as locktest.Bound, which imports lock, which imports this package
		bound *= 4
	}
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > bound {
		t.Fatalf("a queued call with a 10 ms deadline: %v after %v, want context.DeadlineExceeded at the deadline", err, took)
	}
	p.mu.Lock()
	queued := len(p.queue)
	p.mu.Unlock()
	if queued != 1 {
		t.Fatalf("%d calls queued, want 1", queued)
	}
	p.sendAll() // the sender that takes the queue next
	if n := evals.n.Load(); n != 0 {
		t.Errorf("the call was sent %d times, want never: its context had ended", n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) != 0 || p.senders != maxSenders-1 {
		t.Errorf("after the sender: %d calls queued, %d senders; want 0 and %d", len(p.queue), p.senders, maxSenders-1)
	}
}
