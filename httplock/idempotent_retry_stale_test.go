package httplock

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// lateStores is a go-redis hook that, once armed, holds every store of
// an answer (a script call) until opened, then sends it whether or not
// its caller gave up: stores Redis runs late, as commands that were on
// the wire when their caller's deadline passed.
type lateStores struct {
	armed   atomic.Bool
	held    atomic.Int64
	open    chan struct{}
	pending sync.WaitGroup
}

func (g *lateStores) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *lateStores) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !g.armed.Load() || !strings.HasPrefix(cmd.Name(), "eval") {
			return next(ctx, cmd)
		}
		g.pending.Add(1)
		defer g.pending.Done()
		g.held.Add(1)
		<-g.open
		return next(context.WithoutCancel(ctx), cmd)
	}
}

func (g *lateStores) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestIdempotentLateStoresNeverReplaceNewerAnswer runs replica A,
// whose lock Client reaches Redis through a proxy frozen as its handler
// returns, so that its lease lapses while its store is retried, and
// whose stores, the first and the retried ones, Redis runs only after
// replica B ran the request again and stored its own answer: none of
// A's stores replaces B's answer, which both replicas replay.
func TestIdempotentLateStoresNeverReplaceNewerAnswer(t *testing.T) {
	e := newIdemEnv(t)
	proxy := locktest.StartProxy(t, e.srv.Addr)
	lockA := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = lockA.Close() })
	a := &idemEnv{srv: e.srv, rdb: e.srv.Client(t), locker: locktest.NewClient(t, lockA)}
	late := &lateStores{open: make(chan struct{})}
	a.rdb.AddHook(late)
	var opened sync.Once
	openLate := func() { opened.Do(func() { close(late.open) }) }
	t.Cleanup(func() { proxy.Thaw(0); openLate(); late.pending.Wait() })
	opts := []IdempotencyOption{WithIdempotencyLockOptions(lock.WithLease(300 * time.Millisecond)),
		WithStoreTimeout(100 * time.Millisecond)}
	sA := replica(t, a, a.rdb, func(w http.ResponseWriter, r *http.Request) {
		late.armed.Store(true)
		proxy.Freeze() // A's lease lapses while its store is retried
		_, _ = io.WriteString(w, "A")
	}, opts...)
	sB := replica(t, e, e.rdb, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "B")
	}, opts...)
	resp, body, err := post(context.Background(), sA, "k", "x")
	if err != nil || resp.StatusCode != http.StatusOK || body != "A" {
		t.Fatalf("A: %v %v %q, want its handler's answer", resp, err, body)
	}
	a.checkOutcomes(t, "store-failed")
	locktest.Eventually(t, locktest.Bound(5*time.Second), "A's retries to end with its hold", func() bool {
		return retrying.Load() == 0
	})
	if n := late.held.Load(); n < 2 {
		t.Fatalf("%d of A's stores held, want the first and a retried one", n)
	}
	status, body := answerOf(t, func() (*http.Response, string, error) {
		return post(context.Background(), sB, "k", "x")
	})
	if status != http.StatusOK || body != "B" {
		t.Fatalf("B: %d %q, want its own answer", status, body)
	}
	scripts := func() int {
		return locktest.CommandCalls(t, e.rdb, "evalsha") + locktest.CommandCalls(t, e.rdb, "eval")
	}
	before := scripts()
	openLate()
	late.pending.Wait()
	if ran := scripts() - before; ran != int(late.held.Load()) {
		t.Fatalf("Redis ran %d scripts after A's stores went on, want its %d stores", ran, late.held.Load())
	}
	if got := e.srv.HGet(answerKeyOf("k"), "body"); got != "B" {
		t.Fatalf("the stored answer is %q after A's late stores, want B's", got)
	}
	for _, s := range []*httptest.Server{sA, sB} {
		resp, body, err := post(context.Background(), s, "k", "x")
		if err != nil || body != "B" || resp.Header.Get(ReplayedHeader) != "true" {
			t.Fatalf("retry at %s: %v %q, want B's answer replayed", s.URL, err, body)
		}
	}
}

// answerKeyOf is the answer's key of POST payRoute with Idempotency-Key
// k and no scope.
func answerKeyOf(k string) string {
	answer, _ := keys(DefaultKeyPrefix, "POST", payRoute, "", k)
	return answer
}
