package httplock

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// TestIdempotentBodyReadBefore: an outer middleware that read the body
// and did not give it back must not make two bodies share a fingerprint
// (the second would get the first's answer): the middleware answers 500,
// the server's fault, and the handler does not run.
func TestIdempotentBodyReadBefore(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	inner := e.mux(t, counted(&runs))
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // a logging middleware, say, that keeps the body
		if r.Header.Get("X-No-Body") != "" {
			r.Body = http.NoBody // and says so, leaving the Content-Length
		}
		inner.ServeHTTP(w, r)
	})
	for i, body := range []string{"amount=5", "amount=6", "amount=7"} {
		r := pay("1", "k", body)
		if i == 2 {
			r.Header.Set("X-No-Body", "1")
		}
		w := serve(outer, r)
		locktest.CheckProblem(t, w, http.StatusInternalServerError)
		if w.Header().Get(ReplayedHeader) != "" {
			t.Fatalf("body %q: replayed another body's answer", body)
		}
	}
	e.checkOutcomes(t, "consumed-body", "consumed-body", "consumed-body")
	if runs.Load() != 0 {
		t.Fatalf("the handler ran %d times on a body it cannot read", runs.Load())
	}
}

// TestIdempotentBodyNotReadByHandler: a handler that never reads the
// body still gets its answer stored and replayed; another body is 422.
func TestIdempotentBodyNotReadByHandler(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) { runs.Add(1); w.WriteHeader(http.StatusCreated) })
	serve(h, pay("1", "k", "amount=5"))
	if w := serve(h, pay("1", "k", "amount=5")); w.Code != http.StatusCreated || w.Header().Get(ReplayedHeader) != "true" {
		t.Fatalf("retry %d %v, want the 201 replayed", w.Code, w.Header())
	}
	locktest.CheckProblem(t, serve(h, pay("1", "k", "amount=6")), http.StatusUnprocessableEntity)
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}

// slowBody is a request body sent in pieces, each after a pause.
type slowBody struct {
	parts []string
	pause time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(b.parts) == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.pause)
	n := copy(p, b.parts[0])
	b.parts[0] = b.parts[0][n:]
	if b.parts[0] == "" {
		b.parts = b.parts[1:]
	}
	return n, nil
}

// TestIdempotentBodyOverHTTP sends bodies over HTTP without a
// Content-Length: one over the cap is 413 without running the handler,
// and a slow one, longer to send than the acquire timeout, is not taken
// for a stalled Redis.
func TestIdempotentBodyOverHTTP(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	s := replica(t, e, e.rdb, counted(&runs), WithMaxRequestBody(16), WithIdempotencyAcquireTimeout(200*time.Millisecond))
	postBody := func(key string, body io.Reader) (*http.Response, string) {
		t.Helper()
		r, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL+"/orders/1/pay", body)
		r.Header.Set(IdempotencyKeyHeader, key)
		resp, err := s.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Request.ContentLength != -1 && resp.Request.ContentLength != 0 {
			t.Fatalf("the body was sent with a Content-Length")
		}
		return resp, string(b)
	}
	resp, _ := postBody("big", io.NopCloser(strings.NewReader(strings.Repeat("x", 1<<20))))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a chunked body over the cap: %d, want 413", resp.StatusCode)
	}
	resp, body := postBody("slow", &slowBody{parts: []string{"amount", "=5"}, pause: 300 * time.Millisecond})
	if resp.StatusCode != http.StatusCreated || !strings.HasSuffix(body, "paid: amount=5") {
		t.Fatalf("a slow body: %d %q, want 201", resp.StatusCode, body)
	}
	e.checkOutcomes(t, "too-large", "ran")
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}
