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

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// idemEnv is a redis-server started for the test, with a lock Client and
// a go-redis client on it, and the outcomes the middlewares of the test
// reported.
type idemEnv struct {
	srv    *locktest.Redis // the test's direct reads and writes
	rdb    *redis.Client
	locker *lock.Client

	mu       sync.Mutex
	outcomes []string
}

func newIdemEnv(t *testing.T) *idemEnv {
	t.Helper()
	srv, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	t.Cleanup(func() { waitReleased(t) }) // before the Client closes
	return &idemEnv{srv: srv, rdb: rdb, locker: locker}
}

// waitReleased waits until the stores being retried and the releases
// running in the background ended.
func waitReleased(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for retrying.Load() != 0 || httpkit.ReleasesInFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d stores being retried, %d releases still running after 5 s", retrying.Load(), httpkit.ReleasesInFlight())
		}
		time.Sleep(time.Millisecond)
	}
}

// outcome records what the middleware reported.
func (e *idemEnv) outcome(_ context.Context, o string) {
	e.mu.Lock()
	e.outcomes = append(e.outcomes, o)
	e.mu.Unlock()
}

// took returns the outcomes reported so far and forgets them.
func (e *idemEnv) took() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.outcomes
	e.outcomes = nil
	return o
}

// payRoute is the ServeMux pattern of the tests' handler.
const payRoute = "POST /orders/{id}/pay"

// mux serves h on payRoute under the middleware made with opts; the
// middleware reports to e.
func (e *idemEnv) mux(t *testing.T, h http.HandlerFunc, opts ...IdempotencyOption) *http.ServeMux {
	t.Helper()
	m, err := NewIdempotency(e.locker, e.rdb, append([]IdempotencyOption{WithOutcome(e.outcome)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(payRoute, m.Handler(h))
	return mux
}

// counted is a handler that counts its runs and answers 201 with a body
// naming the run and echoing the request's body.
func counted(runs *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Location", "/orders/"+r.PathValue("id"))
		w.Header().Set("X-Run", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "run "+string(rune('0'+n))+" paid: "+string(body))
	}
}

// pay is POST /orders/{id}/pay with an Idempotency-Key of key (none when
// "") and body.
func pay(id, key, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/orders/"+id+"/pay", strings.NewReader(body))
	if key != "" {
		r.Header.Set(IdempotencyKeyHeader, key)
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// checkOutcomes fails the test unless e reported want since the last call.
func (e *idemEnv) checkOutcomes(t *testing.T, want ...string) {
	t.Helper()
	got := e.took()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("outcomes = %q, want %q", got, want)
	}
}
