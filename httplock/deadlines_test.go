package httplock_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// fault is a way for Redis to stop answering the middleware's Client:
// setup returns that Client and the functions that start and end the
// fault.
type fault struct {
	name  string
	setup func(t *testing.T) (locker *lock.Client, start, end func())
}

var faults = []fault{
	{"stalled", func(t *testing.T) (*lock.Client, func(), func()) {
		srv := redistest.Start(t) // SIGSTOP and SIGCONT to this test's server
		return locktest.NewClient(t, srv.Client(t)), srv.Pause, srv.Resume
	}},
	{"half-open", func(t *testing.T) (*lock.Client, func(), func()) {
		srv := redistest.Start(t)
		proxy := locktest.StartProxy(t, srv.Addr)
		rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: redistest.ContextTimeout()})
		t.Cleanup(func() { _ = rdb.Close() })
		return locktest.NewClient(t, rdb), proxy.Freeze, func() { proxy.Thaw(0) }
	}},
	{"closed client", func(t *testing.T) (*lock.Client, func(), func()) {
		srv := redistest.Start(t)
		locker := locktest.NewClient(t, srv.Client(t))
		return locker, func() { _ = locker.Close() }, func() {}
	}},
}

// Whatever stops Redis from answering, a request is answered 503 with
// Retry-After within its acquisition bound (WithAcquireTimeout or
// WithWait) + 100 ms, and the handler does not run.
func TestAnswerWithinAcquisitionBound(t *testing.T) {
	const bound = 300 * time.Millisecond
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			locktest.Timed(t)
			locker, start, end := f.setup(t)
			ran := false
			pay := func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("warm") == "" {
					ran = true
				}
				ok(w, r)
			}
			mux := http.NewServeMux()
			mux.Handle("POST /try/{id}", httplock.New(locker, "orders:{id}", httplock.WithAcquireTimeout(bound))(http.HandlerFunc(pay)))
			mux.Handle("POST /wait/{id}", httplock.New(locker, "orders:{id}", httplock.WithWait(bound))(http.HandlerFunc(pay)))
			for _, p := range []string{"/try/1?warm=1", "/wait/1?warm=1"} { // connections and scripts ready
				if w := do(mux, http.MethodPost, p); w.Code != http.StatusOK {
					t.Fatalf("warm-up %s: status %d", p, w.Code)
				}
			}
			released(t)
			start()
			for _, p := range []string{"/try/1", "/wait/1"} {
				began := time.Now()
				w := do(mux, http.MethodPost, p)
				took := time.Since(began)
				locktest.CheckProblem(t, w, http.StatusServiceUnavailable)
				if got := w.Header().Get("Retry-After"); got != "1" {
					t.Errorf("%s: Retry-After %q, want 1", p, got)
				}
				if limit := bound + locktest.Bound(100*time.Millisecond); took > limit {
					t.Errorf("%s: answered after %v, want within %v", p, took, limit)
				}
				t.Logf("%s: %d after %v", p, w.Code, took)
			}
			end()
			released(t)
			if ran {
				t.Fatal("the handler ran without the lock")
			}
		})
	}
}

// A handler that finished while Redis stopped answering gets its answer
// to the client within 100 ms: the release goes on in the background, and
// the key is free again once Redis answers.
func TestFinishedHandlerAnsweredWithin100ms(t *testing.T) {
	for _, f := range faults[:2] {
		t.Run(f.name, func(t *testing.T) {
			locktest.Timed(t)
			locker, start, end := f.setup(t)
			var returned time.Time
			mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}"), func(w http.ResponseWriter, r *http.Request) {
				ok(w, r)
				if r.URL.Query().Get("stall") != "" {
					start()
				}
				returned = time.Now()
			})
			if w := do(mux, http.MethodPost, "/orders/1/pay"); w.Code != http.StatusOK {
				t.Fatalf("warm-up: status %d", w.Code)
			}
			released(t)
			w := do(mux, http.MethodPost, "/orders/1/pay?stall=1")
			took := time.Since(returned)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", w.Code)
			}
			if limit := 100*time.Millisecond + locktest.Bound(50*time.Millisecond); took > limit {
				t.Errorf("answered %v after the handler returned, want within %v", took, limit)
			}
			if n := httplock.ReleasesInFlight(); n != 1 {
				t.Errorf("%d releases in flight while Redis does not answer, want 1", n)
			}
			end()
			released(t)
			if w := do(mux, http.MethodPost, "/orders/1/pay"); w.Code != http.StatusOK {
				t.Fatalf("after Redis answers again: status %d, want 200", w.Code)
			}
		})
	}
}
