package httplock

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// gate is a handler whose first run, once begun, waits until the test
// lets it finish; every run answers "paid" and is counted.
type gate struct {
	runs    atomic.Int64
	started chan struct{}
	proceed chan struct{}
}

func newGate() *gate { return &gate{started: make(chan struct{}), proceed: make(chan struct{})} }

func (g *gate) serve(w http.ResponseWriter, r *http.Request) {
	if g.runs.Add(1) == 1 {
		close(g.started)
		<-g.proceed
	}
	_, _ = io.ReadAll(r.Body)
	_, _ = io.WriteString(w, "paid")
}

// answer is what a client got: a status and body, or an error.
type answer struct {
	resp *http.Response
	body string
	err  error
}

// stallFirstRun sends a request with key and body to s, whose handler is
// g's, stops Redis (SIGSTOP) while the first run runs, and lets the run
// finish: the answer comes on the channel. Redis is resumed when the
// test ends, if not before. It returns when Redis was stopped.
func (e *idemEnv) stallFirstRun(t *testing.T, s *httptest.Server, g *gate, key, body string) (<-chan answer, time.Time) {
	t.Helper()
	first := make(chan answer, 1)
	go func() {
		resp, b, err := post(context.Background(), s, key, body)
		first <- answer{resp, b, err}
	}()
	locktest.Within(t, g.started, locktest.Bound(5*time.Second), "the handler's run")
	e.srv.Pause()
	t.Cleanup(e.srv.Resume) // before the server stops
	stopped := time.Now()
	close(g.proceed)
	return first, stopped
}

// paid fails t unless a is the handler's own answer.
func (a answer) paid(t *testing.T, what string) {
	t.Helper()
	if a.err != nil || a.resp.StatusCode != http.StatusOK || a.body != "paid" {
		t.Fatalf("%s: %v %v %q, want the handler's answer", what, a.resp, a.err, a.body)
	}
}
