package httplock

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// storeGate is a go-redis hook that, once armed, holds the next store of
// an answer (the script call) until opened, and says when it got there.
type storeGate struct {
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	open    chan struct{}
}

func newStoreGate() *storeGate {
	return &storeGate{reached: make(chan struct{}), open: make(chan struct{})}
}

func (g *storeGate) arm() { g.mu.Lock(); g.armed = true; g.mu.Unlock() }

func (g *storeGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *storeGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			g.mu.Lock()
			hold := g.armed
			g.armed = false
			g.mu.Unlock()
			if hold {
				close(g.reached)
				<-g.open
			}
		}
		return next(ctx, cmd)
	}
}

func (g *storeGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// answerOf posts to s until it is not turned away (409) and returns the
// answer.
func answerOf(t *testing.T, post func() (*http.Response, string, error)) (int, string) {
	t.Helper()
	var status int
	var body string
	locktest.Eventually(t, locktest.Bound(5*time.Second), "a request not turned away", func() bool {
		resp, b, err := post()
		if err != nil {
			t.Fatal(err)
		}
		status, body = resp.StatusCode, b
		return status != http.StatusConflict
	})
	return status, body
}

// TestIdempotentStaleReplica runs replica A, whose lock Client reaches
// Redis through a proxy, until its lease lapses behind a partition while
// it still works (in the handler, or with its store on the way), and
// replica B, with a lock Client of its own, then runs the request again:
// A's answer never replaces B's.
func TestIdempotentStaleReplica(t *testing.T) {
	for _, stall := range []string{"handler", "store"} {
		t.Run(stall, func(t *testing.T) {
			e := newIdemEnv(t)
			proxy := locktest.StartProxy(t, e.srv.Addr)
			lockA := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = lockA.Close() })
			a := &idemEnv{srv: e.srv, rdb: e.srv.Client(t), locker: locktest.NewClient(t, lockA)}
			var logs locktest.SyncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			gate := newStoreGate()
			a.rdb.AddHook(gate)
			const lease = 300 * time.Millisecond
			opts := []IdempotencyOption{WithIdempotencyLockOptions(lock.WithLease(lease)), WithStoreTimeout(time.Minute)}
			lost := make(chan struct{})
			sA := replica(t, a, a.rdb, func(w http.ResponseWriter, r *http.Request) {
				if stall == "handler" {
					proxy.Freeze()
					<-r.Context().Done() // the lease lapsed
					close(lost)
				} else {
					gate.arm()
				}
				_, _ = io.WriteString(w, "A")
			}, append(opts, WithLogger(logger))...)
			sB := replica(t, e, e.rdb, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "B")
			}, opts...)
			t.Cleanup(func() { proxy.Thaw(0) })
			aDone := make(chan string, 1)
			go func() {
				_, body, err := post(context.Background(), sA, "k", "x")
				if err != nil {
					t.Error(err)
				}
				aDone <- body
			}()
			if stall == "store" {
				locktest.Within(t, gate.reached, locktest.Bound(5*time.Second), "A's store")
				proxy.Freeze() // A's lease lapses while its store waits
			} else {
				locktest.Within(t, lost, locktest.Bound(5*time.Second), "A's lease lost")
			}
			status, body := answerOf(t, func() (*http.Response, string, error) {
				return post(context.Background(), sB, "k", "x")
			})
			if status != http.StatusOK || body != "B" {
				t.Fatalf("B: %d %q, want its own answer", status, body)
			}
			close(gate.open) // A's store arrives late
			if got := <-aDone; got != "A" {
				t.Fatalf("A's client got %q, want A's answer", got)
			}
			if o := a.took(); len(o) != 1 || o[0] != "not-stored" {
				t.Fatalf("A's outcomes %q, want not-stored", o)
			}
			why := map[string]string{"handler": "the run lock was lost", "store": "a newer answer is stored"}[stall]
			if !strings.Contains(logs.String(), why) {
				t.Fatalf("A's logs do not say %q:\n%s", why, logs.String())
			}
			for _, s := range []*httptest.Server{sA, sB} {
				resp, body, err := post(context.Background(), s, "k", "x")
				if err != nil || body != "B" || resp.Header.Get(ReplayedHeader) != "true" {
					t.Fatalf("retry at %s: %v %q, want B's answer replayed", s.URL, err, body)
				}
			}
		})
	}
}

// TestIdempotentRetriesWhileStoring sends retries to both replicas while
// the first request's answer is being stored: each is 409, the handler
// never runs twice, and once stored the answer is replayed.
func TestIdempotentRetriesWhileStoring(t *testing.T) {
	e := newIdemEnv(t)
	b := &idemEnv{srv: e.srv, rdb: e.srv.Client(t), locker: locktest.NewClient(t, e.srv.Client(t))}
	gate := newStoreGate()
	e.rdb.AddHook(gate)
	var runs atomic.Int64
	h := func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			gate.arm()
		}
		_, _ = io.WriteString(w, "paid")
	}
	servers := []*httptest.Server{replica(t, e, e.rdb, h), replica(t, b, b.rdb, h)}
	first := make(chan string, 1)
	go func() {
		_, body, err := post(context.Background(), servers[0], "k", "x")
		if err != nil {
			t.Error(err)
		}
		first <- body
	}()
	locktest.Within(t, gate.reached, locktest.Bound(5*time.Second), "the store")
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body, err := post(context.Background(), servers[i%2], "k", "x")
			if err != nil || resp.StatusCode != http.StatusConflict {
				t.Errorf("retry %d while storing: %v %v %q, want 409", i, err, resp, body)
			}
		}()
	}
	wg.Wait()
	close(gate.open)
	if got := <-first; got != "paid" {
		t.Fatalf("the first request got %q", got)
	}
	resp, body, err := post(context.Background(), servers[1], "k", "x")
	if err != nil || body != "paid" || resp.Header.Get(ReplayedHeader) != "true" {
		t.Fatalf("retry after the store: %v %q, want the answer replayed", err, body)
	}
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}

// storesInFlight counts the goroutines of bounded Redis calls.
func storesInFlight() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "httplock.bounded[")
}

// TestIdempotentStalledStoreGoroutines stalls Redis (SIGSTOP) when the
// answer is stored: the client gets the handler's answer after the store
// timeout, and the goroutine of the store ends once Redis resumes.
func TestIdempotentStalledStoreGoroutines(t *testing.T) {
	e := newIdemEnv(t)
	t.Cleanup(e.srv.Resume)
	gate := newStoreGate()
	e.rdb.AddHook(gate)
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
		gate.arm()
		_, _ = io.WriteString(w, "paid")
	}, WithStoreTimeout(200*time.Millisecond))
	go func() {
		<-gate.reached
		e.srv.Pause()
		close(gate.open)
	}()
	if w := serve(h, pay("1", "k", "")); w.Code != http.StatusOK || w.Body.String() != "paid" {
		t.Fatalf("answer %d %q, want the handler's", w.Code, w.Body)
	}
	e.checkOutcomes(t, "store-failed")
	// With ContextTimeoutEnabled go-redis itself ends the call at the
	// store timeout; without, the call waits for Redis past it.
	if !redistest.ContextTimeout() && storesInFlight() == 0 {
		t.Fatal("no store goroutine while Redis stalls: the test measures nothing")
	}
	e.srv.Resume()
	locktest.Eventually(t, locktest.Bound(2*time.Second), "the store goroutine to end", func() bool {
		return storesInFlight() == 0
	})
}
