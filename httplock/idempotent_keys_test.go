package httplock

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// TestIdempotentKeysNeverShared: the same Idempotency-Key on two routes,
// two methods or for two scopes, and tuples that would collide if ':' or
// '%' were not escaped, each run the handler once.
func TestIdempotentKeysNeverShared(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	m, err := NewIdempotency(e.locker, e.rdb, WithOutcome(e.outcome),
		WithScope(func(r *http.Request) string { return r.Header.Get("X-User") }))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, p := range []string{"POST /a", "PUT /a", "POST /b"} {
		mux.Handle(p, m.Handler(counted(&runs)))
	}
	for _, rq := range []struct{ method, path, user, key string }{
		{"POST", "/a", "alice", "k"},
		{"PUT", "/a", "alice", "k"},
		{"POST", "/b", "alice", "k"},
		{"POST", "/a", "bob", "k"},
		{"POST", "/a", "u:1", "k"},
		{"POST", "/a", "u", "1:k"},
		{"POST", "/a", "u%3A1", "k"},
		{"POST", "/a", "%h" + strings.Repeat("0", 64), "k"},
		{"POST", "/a", strings.Repeat("s", 100), "k"},
	} {
		r := pay("1", rq.key, "")
		r.Method, r.URL.Path, r.RequestURI = rq.method, rq.path, rq.path
		r.Header.Set("X-User", rq.user)
		if w := serve(mux, r); w.Code != http.StatusCreated || w.Header().Get(ReplayedHeader) != "" {
			t.Fatalf("%+v: %d %v, want a run of its own", rq, w.Code, w.Header())
		}
	}
	if runs.Load() != 9 {
		t.Fatalf("%d runs, want 9", runs.Load())
	}
}

// TestIdempotentKeySyntax: a key of 255 bytes is used and replayed, one
// of 256 is 400, as is a bare key with a space (only an RFC 8941 String
// may hold one) and an unclosed String.
func TestIdempotentKeySyntax(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, counted(&runs))
	long := strings.Repeat("k", 255)
	for _, key := range []string{long, `"` + long + `"`} {
		if w := serve(h, pay("1", key, "")); w.Code != http.StatusCreated {
			t.Fatalf("a 255-byte key: %d", w.Code)
		}
	}
	e.checkOutcomes(t, "ran", "replayed")
	for _, key := range []string{long + "k", "a b", `"a\"b`} {
		locktest.CheckProblem(t, serve(h, pay("1", key, "")), http.StatusBadRequest)
	}
	e.checkOutcomes(t, "invalid-key", "invalid-key", "invalid-key")
	if runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", runs.Load())
	}
}

// TestIdempotentLogsHoldNoSecrets drives the outcomes that log (503,
// store failed, not stored, a body read before) and checks that no
// record holds the key, the scope or a body.
func TestIdempotentLogsHoldNoSecrets(t *testing.T) {
	e := newIdemEnv(t)
	t.Cleanup(e.srv.Resume)
	var logs locktest.SyncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gate := newStoreGate()
	e.rdb.AddHook(gate)
	m, err := NewIdempotency(e.locker, e.rdb, WithOutcome(e.outcome), WithLogger(logger),
		WithScope(func(r *http.Request) string { return r.Header.Get("X-User") }),
		WithIdempotencyAcquireTimeout(200*time.Millisecond), WithStoreTimeout(200*time.Millisecond), WithMaxAnswerBody(4))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b) // past the cap of 4 bytes: streamed, not stored
	}))
	req := func(key, body string) *http.Request {
		r := pay("1", key, body)
		r.Header.Set("X-User", "secret-user")
		return r
	}
	serve(h, req("secret-key-1", "secret-body-1")) // streamed: not stored
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		h.ServeHTTP(w, r)
	})
	serve(outer, req("secret-key-2", "secret-body-2")) // body read before
	go func() {
		<-gate.reached
		e.srv.Pause()
		close(gate.open)
	}()
	m2, _ := NewIdempotency(e.locker, e.rdb, WithLogger(logger), WithStoreTimeout(200*time.Millisecond),
		WithScope(func(r *http.Request) string { return r.Header.Get("X-User") }))
	h2 := m2.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gate.arm()
		_, _ = io.WriteString(w, "secret-answer")
	}))
	serve(h2, req("secret-key-3", "secret-body-3")) // store failed
	serve(h, req("secret-key-4", "secret-body-4"))  // 503: Redis stalled
	e.srv.Resume()
	got := logs.String()
	for _, want := range []string{"not stored", "read before", "storing an idempotent answer failed", "reading a stored idempotent answer failed"} {
		if !strings.Contains(got, want) {
			t.Fatalf("no record %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "secret") {
		t.Fatalf("the logs hold a key, scope or body:\n%s", got)
	}
}
