package httplock

import (
	"context"
	"io"
	"log"
	"log/slog"
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

// replica serves the test's handler under a middleware of its own lock
// Client over HTTP, as one process of a service; answers are kept in rdb.
func replica(t *testing.T, e *idemEnv, rdb redis.UniversalClient, h http.HandlerFunc, opts ...IdempotencyOption) *httptest.Server {
	t.Helper()
	m, err := NewIdempotency(e.locker, rdb, append([]IdempotencyOption{WithOutcome(e.outcome)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(payRoute, m.Handler(h))
	s := httptest.NewUnstartedServer(mux)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the panic test's stack
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// post sends POST /orders/1/pay with key and body to s.
func post(ctx context.Context, s *httptest.Server, key, body string) (*http.Response, string, error) {
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/orders/1/pay", strings.NewReader(body))
	r.Header.Set(IdempotencyKeyHeader, key)
	resp, err := s.Client().Do(r)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func TestIdempotentDuplicatesAcrossClients(t *testing.T) {
	e1 := newIdemEnv(t)
	srv := e1.srv
	e2 := &idemEnv{rdb: srv.Client(t), locker: locktest.NewClient(t, srv.Client(t))}
	var runs atomic.Int64
	proceed := make(chan struct{})
	h := func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		<-proceed // the duplicates arrive while the first request runs
		counted(new(atomic.Int64))(w, r)
	}
	replicas := []*httptest.Server{replica(t, e1, e1.rdb, h), replica(t, e2, e2.rdb, h)}
	var once sync.Once
	unblock := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(unblock) // a failed test's handler returns before the servers close
	const n = 8
	type answer struct {
		status  int
		body    string
		replay  string
		retryIn string
	}
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			resp, body, err := post(context.Background(), replicas[i%2], "pay-1", "amount=5")
			if err != nil {
				t.Error(err)
				answers <- answer{}
				return
			}
			answers <- answer{resp.StatusCode, body, resp.Header.Get(ReplayedHeader), resp.Header.Get("Retry-After")}
		}()
	}
	for range n - 1 { // all but the request that runs
		select {
		case a := <-answers:
			if a.status != http.StatusConflict || a.retryIn != "1" {
				t.Fatalf("a duplicate got %d (Retry-After %q): %s; want 409", a.status, a.retryIn, a.body)
			}
		case <-time.After(locktest.Bound(5 * time.Second)):
			t.Fatalf("not all duplicates were answered while the first ran (%d runs)", runs.Load())
		}
	}
	unblock()
	first := <-answers
	if first.status != http.StatusCreated || first.replay != "" {
		t.Fatalf("the first request got %d %q", first.status, first.body)
	}
	for i := range 4 {
		resp, body, err := post(context.Background(), replicas[i%2], "pay-1", "amount=5")
		if err != nil || resp.StatusCode != http.StatusCreated || body != first.body || resp.Header.Get(ReplayedHeader) != "true" {
			t.Fatalf("retry %d: %v %v %q, want the first answer replayed", i, err, resp, body)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}

func TestIdempotentRedisStalled(t *testing.T) {
	e := newIdemEnv(t)
	srv := e.srv
	var logs locktest.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var runs atomic.Int64
	started, proceed := make(chan struct{}, 1), make(chan struct{})
	const acquire, store = 300 * time.Millisecond, 300 * time.Millisecond
	s := replica(t, e, e.rdb, func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		started <- struct{}{}
		<-proceed
		_, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "paid")
	}, WithIdempotencyAcquireTimeout(acquire), WithStoreTimeout(store), WithLogger(logger))
	var once sync.Once
	unblock := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(unblock) // a failed test's handler returns before the server closes
	type result struct {
		status int
		body   string
		took   time.Duration
	}
	first := make(chan result, 1)
	go func() {
		resp, body, err := post(context.Background(), s, "secret-key-a", "secret-body")
		if err != nil {
			t.Error(err)
			first <- result{}
			return
		}
		first <- result{resp.StatusCode, body, 0}
	}()
	<-started
	srv.Pause()
	t.Cleanup(srv.Resume) // before the server stops
	start := time.Now()
	resp, _, err := post(context.Background(), s, "secret-key-b", "secret-body")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a new request on a stalled Redis: %v %v, want 503 with Retry-After", resp, err)
	}
	if took, limit := time.Since(start), locktest.Bound(acquire+200*time.Millisecond); took > limit {
		t.Fatalf("the 503 took %v, more than %v", took, limit)
	}
	start = time.Now()
	unblock()
	a := <-first
	if a.status != http.StatusOK || a.body != "paid" {
		t.Fatalf("the running request got %d %q while Redis stalled, want the handler's answer", a.status, a.body)
	}
	if took, limit := time.Since(start), locktest.Bound(store+100*time.Millisecond+200*time.Millisecond); took > limit {
		t.Fatalf("the handler's answer took %v after it returned, more than %v", took, limit)
	}
	got := e.took()
	if strings.Join(got, ",") != "unavailable,store-failed" {
		t.Fatalf("outcomes %q, want unavailable, store-failed", got)
	}
	srv.Resume()
	// The run keeps its lock and stores the answer once Redis resumes:
	// a retry replays it.
	var retry *http.Response
	var body string
	locktest.Eventually(t, locktest.Bound(3*time.Second), "a retry not turned away", func() bool {
		retry, body, err = post(context.Background(), s, "secret-key-a", "secret-body")
		return err == nil && retry.StatusCode != http.StatusConflict && retry.StatusCode != http.StatusServiceUnavailable
	})
	replayed := retry.Header.Get(ReplayedHeader) == "true"
	if retry.StatusCode != http.StatusOK || body != "paid" || !replayed || runs.Load() != 1 {
		t.Fatalf("retry: %d %q replayed=%v after %d runs, want the handler's answer replayed", retry.StatusCode, body, replayed, runs.Load())
	}
	for _, secret := range []string{"secret-key", "secret-body", "paid"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("the logs hold %q:\n%s", secret, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "storing an idempotent answer failed") || !strings.Contains(logs.String(), "key_digest=") {
		t.Fatalf("the failed store is not logged with the key's digest:\n%s", logs.String())
	}
}

func TestIdempotentPanicOverHTTP(t *testing.T) {
	e := newIdemEnv(t)
	s := replica(t, e, e.rdb, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "half an answer")
		panic("boom")
	})
	if _, _, err := post(context.Background(), s, "k", ""); err == nil {
		t.Fatal("a panicking handler's request got an answer")
	}
	waitReleased(t)
	answer, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	if n, err := e.rdb.Exists(context.Background(), answer).Result(); err != nil || n != 0 {
		t.Fatalf("a panicking handler's answer was stored (%d, %v)", n, err)
	}
	_, unlock, err := e.locker.TryLock(context.Background(), run)
	if err != nil {
		t.Fatalf("the run lock is held after the panic: %v", err)
	}
	_ = unlock()
}

func TestIdempotentClientGoesAway(t *testing.T) {
	e := newIdemEnv(t)
	started, finished := make(chan struct{}), make(chan bool, 1)
	_, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	var runs atomic.Int64
	s := replica(t, e, e.rdb, func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		close(started)
		<-r.Context().Done() // the client went away; the lock is still held
		finished <- lock.Held(r.Context(), run)
		_, _ = io.WriteString(w, "paid")
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	if _, _, err := post(ctx, s, "k", "amount=5"); err == nil {
		t.Fatal("the request was answered though its client went away")
	}
	if !<-finished {
		t.Fatal("the run lock was not held after the client went away")
	}
	locktest.Eventually(t, locktest.Bound(2*time.Second), "the outcome", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.outcomes) == 1
	})
	e.checkOutcomes(t, "ran")
	resp, body, err := post(context.Background(), s, "k", "amount=5")
	if err != nil || body != "paid" || resp.Header.Get(ReplayedHeader) != "true" || runs.Load() != 1 {
		t.Fatalf("the retry: %v %v %q after %d runs, want the stored answer replayed", resp, err, body, runs.Load())
	}
}
