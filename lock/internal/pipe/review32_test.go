package pipe

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock/internal/scripts"
	"github.com/lockkit/lockkit/lock/internal/tasks"
)

// Adversarial review of the inline lone call (runInline).

// review32Bound scales d as locktest.Bound does (locktest imports lock,
// which imports this package).
func review32Bound(d time.Duration) time.Duration {
	if os.Getenv("LOCKKIT_TIMING") == "1" {
		return d
	}
	return 8 * d
}

// review32Pipe returns a Pipe over a go-redis client of srv with
// ContextTimeoutEnabled and opt's other settings, its Runner, and the
// client, all closed when the test ends.
func review32Pipe(t *testing.T, srv *redistest.Server, opt redis.Options) (*Pipe[int], *tasks.Runner, *redis.Client) {
	t.Helper()
	opt.Addr = srv.Addr
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(&opt)
	t.Cleanup(func() { _ = rdb.Close() })
	run := tasks.New()
	t.Cleanup(func() { run.Close(time.Second) })
	p := New[int](rdb, run, context.Background())
	if !p.inline {
		t.Fatal("the pipe does not send lone calls inline")
	}
	return p, run, rdb
}

// renew runs the renew script for key through p under ctx.
func review32Renew(p *Pipe[int], ctx context.Context, key string) *redis.Cmd {
	return p.Run(ctx, scripts.Renew, 0, nil, []any{"", "", 1, key}, []any{"owner", 1000})
}

// TestReview32InlineCallerDoesNotSendOthersCallsAfterClose: a lone call
// sent on its caller's goroutine returns at its deadline + 100 ms on a
// stalled Redis, even when, as it ends, the Runner is closed (the lock
// Client is closing) and another call waits in the queue.
//
// runInline passes its sender's slot on with p.start(p.ctx): once the
// Runner is closed, tasks.Run refuses, and p.ctx (the pipe's background,
// never cancelled) lets start run sendAll on the inline caller's own
// goroutine, which then sends the queued call of another caller, and
// whatever else queues meanwhile, under their contexts or, for several,
// as a pipeline under p.ctx bounded only by ReadTimeout. Before the
// change, a caller ran sendAll itself only under its own live context.
// The queue is held here as if the stall timer had not fired yet (as
// TestQueuedCallWhoseContextEndedIsNotSent does); with a stream of calls a
// queued call waits up to stallAfter for that timer.
func TestReview32InlineCallerDoesNotSendOthersCallsAfterClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, run, _ := review32Pipe(t, srv, redis.Options{MaxRetries: -1})
	if err := review32Renew(p, context.Background(), "warm").Err(); err != nil { // loads the script
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()

	const limit = 300 * time.Millisecond
	type result struct {
		err  error
		took time.Duration
	}
	lone := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		start := time.Now()
		err := review32Renew(p, ctx, "lone").Err()
		lone <- result{err, time.Since(start)}
	}()
	for end := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		s := p.senders
		p.mu.Unlock()
		if s == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the lone call did not take a sender's slot")
		}
	}
	go run.Close(0) // the lock Client's Close
	for end := time.Now().Add(time.Second); run.Enter(); time.Sleep(time.Millisecond) {
		run.Leave()
		if time.Now().After(end) {
			t.Fatal("the Runner did not close")
		}
	}

	// Another caller with a longer deadline: it takes the second slot and,
	// the Runner being closed, sends on its own goroutine; a third queues.
	others, cancelOthers := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelOthers()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); _ = review32Renew(p, others, "second").Err() }()
	for end := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		s := p.senders
		p.mu.Unlock()
		if s == maxSenders {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the second call did not take a sender's slot")
		}
	}
	p.mu.Lock()
	p.watch = time.AfterFunc(time.Hour, func() {}) // the stall timer has not fired yet
	p.watch.Stop()
	p.mu.Unlock()
	wg.Add(1)
	go func() { defer wg.Done(); _ = review32Renew(p, others, "queued").Err() }()

	r := <-lone
	t.Logf("lone call with a %v deadline: %v after %v", limit, r.err, r.took)
	if bound := limit + review32Bound(100*time.Millisecond); r.took > bound {
		t.Errorf("the lone call took %v with a %v deadline (bound %v): its goroutine sent another caller's call", r.took, limit, bound)
	}
	if r.err == nil {
		t.Errorf("the lone call on a stalled Redis succeeded")
	}
}
