package pipe

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
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

// goroutineID is the id of the calling goroutine, from its stack's first
// line ("goroutine 42 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// senderOf records the goroutine that sends each script command.
type senderOf struct {
	mu  sync.Mutex
	ids []string
}

func (s *senderOf) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *senderOf) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			s.mu.Lock()
			s.ids = append(s.ids, goroutineID())
			s.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (s *senderOf) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A lone call runs on its caller's goroutine exactly when the Redis client
// bounds it by its context's deadline (ContextTimeoutEnabled, with read
// and write timeouts): a sender goroutine otherwise, so that the caller
// can leave at its deadline whatever go-redis does.
func TestLoneCallRunsOnCallersGoroutineWhenRedisBoundsIt(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name   string
		opt    redis.Options
		inline bool
	}{
		{"default timeouts", redis.Options{}, false},
		{"ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}, true},
		{"ContextTimeoutEnabled, no read timeout", redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -1}, false},
		{"ContextTimeoutEnabled, no deadlines set", redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt
			opt.Addr = srv.Addr
			rdb := redis.NewClient(&opt)
			t.Cleanup(func() { _ = rdb.Close() })
			hook := &senderOf{}
			rdb.AddHook(hook)
			run := tasks.New()
			t.Cleanup(func() { run.Close(time.Second) })
			p := New[int](rdb, run, context.Background())
			replied := ""
			then := func(int, *redis.Cmd) chan struct{} { replied = goroutineID(); return nil }
			for range 2 { // the first loads the script: EVALSHA, then EVAL
				if err := p.Run(context.Background(), scripts.Renew, 0, then, []any{"", "", 1, "k"}, []any{"owner", 1000}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			caller := goroutineID()
			hook.mu.Lock()
			ids := hook.ids
			hook.mu.Unlock()
			if len(ids) < 2 {
				t.Errorf("%d script commands sent, want one per call at least", len(ids))
			}
			for _, id := range ids {
				if (id == caller) != tc.inline {
					t.Errorf("sent on goroutine %s, the caller's is %s: on the caller's = %v, want %v", id, caller, id == caller, tc.inline)
				}
			}
			if (replied == caller) != tc.inline {
				t.Errorf("reply handled on goroutine %s, the caller's is %s, want on the caller's = %v", replied, caller, tc.inline)
			}
			// A lone call frees its slot before it returns; a sender goroutine
			// frees its own once it finds the queue empty.
			idle := func() bool {
				p.mu.Lock()
				defer p.mu.Unlock()
				return p.senders == 0 && len(p.queue) == 0
			}
			for end := time.Now().Add(5 * time.Second); !tc.inline && !idle() && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			if !idle() {
				t.Errorf("after the calls: a sender's slot is still taken")
			}
		})
	}
}
