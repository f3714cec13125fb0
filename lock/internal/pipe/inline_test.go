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

// Lone calls on the caller's goroutine (runInline) beside queued ones.

// scaledBound scales d as locktest.Bound does (locktest imports lock,
// which imports this package).
func scaledBound(d time.Duration) time.Duration {
	if os.Getenv("LOCKKIT_TIMING") == "1" {
		return d
	}
	return 8 * d
}

// inlinePipe returns a Pipe over a go-redis client of srv with
// ContextTimeoutEnabled and opt's other settings, its Runner, and the
// client, all closed when the test ends.
func inlinePipe(t *testing.T, srv *redistest.Server, opt redis.Options) (*Pipe[int], *tasks.Runner, *redis.Client) {
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

// renewCall runs the renew script for key through p under ctx.
func renewCall(p *Pipe[int], ctx context.Context, key string) *redis.Cmd {
	return p.Run(ctx, scripts.Renew, 0, nil, []any{"", "", 1, key}, []any{"owner", 1000})
}

// TestInlineCallerDoesNotSendOthersCallsAfterClose: a lone call
// sent on its caller's goroutine returns at its deadline + 100 ms on a
// stalled Redis, even when, as it ends, the Runner is closed (the lock
// Client is closing) and another call waits in the queue.
// The caller, whose own call is done, must not send the queued call
// itself (under the others' contexts or the pipe's, which nothing
// cancels): the stall timer starts a sender for it. The queue is held
// here as if the stall timer had not fired yet (as
// TestQueuedCallWhoseContextEndedIsNotSent does); with a stream of calls
// a queued call waits up to stallAfter for that timer.
func TestInlineCallerDoesNotSendOthersCallsAfterClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, run, _ := inlinePipe(t, srv, redis.Options{MaxRetries: -1})
	if err := renewCall(p, context.Background(), "warm").Err(); err != nil { // loads the script
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
		err := renewCall(p, ctx, "lone").Err()
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
	go func() { defer wg.Done(); _ = renewCall(p, others, "second").Err() }()
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
	go func() { defer wg.Done(); _ = renewCall(p, others, "queued").Err() }()

	r := <-lone
	t.Logf("lone call with a %v deadline: %v after %v", limit, r.err, r.took)
	if bound := limit + scaledBound(100*time.Millisecond); r.took > bound {
		t.Errorf("the lone call took %v with a %v deadline (bound %v): its goroutine sent another caller's call", r.took, limit, bound)
	}
	if r.err == nil {
		t.Errorf("the lone call on a stalled Redis succeeded")
	}
}

// TestInlineAndQueuedCallsEachSentOnce: many goroutines of one
// Pipe whose lone calls go inline and whose others queue: every call is
// sent exactly once (counted by a hook of go-redis, alone or in a
// pipeline), its reply handler runs exactly once, and afterwards no
// sender's slot is left taken and the queue is empty.
func TestInlineAndQueuedCallsEachSentOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, _, rdb := inlinePipe(t, srv, redis.Options{PoolSize: 2})
	if err := renewCall(p, context.Background(), "warm").Err(); err != nil { // loads the script
		t.Fatal(err)
	}
	evals := &evalCount{}
	rdb.AddHook(evals)
	const goroutines, each = 16, 300
	var replies sync.Map // call number -> times its handler ran
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := g*each + i
				then := func(h int, _ *redis.Cmd) chan struct{} {
					v, _ := replies.LoadOrStore(h, new(int64))
					*(v.(*int64))++ // one handler per call: a second run is a race the detector reports
					return nil
				}
				if err := p.Run(context.Background(), scripts.Renew, n, then, []any{"", "", 1, "k"}, []any{"owner", 1000}).Err(); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					time.Sleep(time.Millisecond) // lets the pipe go idle now and then: lone calls again
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := evals.n.Load(); n != goroutines*each {
		t.Errorf("%d script commands sent for %d calls", n, goroutines*each)
	}
	count := 0
	replies.Range(func(_, v any) bool {
		count++
		if n := *(v.(*int64)); n != 1 {
			t.Errorf("a call's reply handler ran %d times", n)
		}
		return true
	})
	if count != goroutines*each {
		t.Errorf("reply handlers ran for %d of %d calls", count, goroutines*each)
	}
	idle := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.senders == 0 && len(p.queue) == 0
	}
	for end := time.Now().Add(5 * time.Second); !idle() && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if !idle() {
		p.mu.Lock()
		t.Errorf("after the calls: %d senders, %d calls queued; want 0 and 0", p.senders, len(p.queue))
		p.mu.Unlock()
	}
}

// TestInlineCallerAfterCloseWithAStreamOfCalls is
// TestInlineCallerDoesNotSendOthersCallsAfterClose without
// holding the stall timer: once the Runner is closed, other callers
// (5 s deadlines) start a call every 200 µs around the lone call's
// deadline. Each waits in the queue until the stall timer gives it a
// sender, up to stallAfter; a lone call that ends in such a moment must
// still return at its own deadline, not send what keeps coming.
func TestInlineCallerAfterCloseWithAStreamOfCalls(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, run, _ := inlinePipe(t, srv, redis.Options{MaxRetries: -1, PoolSize: 1000})
	if err := renewCall(p, context.Background(), "warm").Err(); err != nil { // loads the script
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	const limit = 300 * time.Millisecond
	others, cancelOthers := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelOthers()
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	lone := make(chan time.Duration, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		start := time.Now()
		_ = renewCall(p, ctx, "lone").Err()
		lone <- time.Since(start)
		close(stop)
	}()
	time.Sleep(10 * time.Millisecond) // the lone call is on its way
	run.Close(0)                      // the lock Client's Close
	time.Sleep(limit - 60*time.Millisecond)
	for i := 0; i < 2000; i++ {
		select {
		case <-stop:
			i = 2000
			continue
		default:
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = renewCall(p, others, "other").Err() }()
		time.Sleep(200 * time.Microsecond)
	}
	took := <-lone
	t.Logf("lone call with a %v deadline returned after %v", limit, took)
	if bound := limit + scaledBound(100*time.Millisecond); took > bound {
		t.Errorf("the lone call took %v with a %v deadline (bound %v): its goroutine sent other callers' calls", took, limit, bound)
	}
}
