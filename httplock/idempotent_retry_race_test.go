package httplock

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// TestIdempotentDuplicatesRacingRetriedStoreRunOnce runs two replicas, each
// with a lock Client of its own, stops Redis (SIGSTOP) while replica A's
// handler runs, for longer than the store timeout, and sends duplicates
// to both replicas, 8 at a time, as Redis resumes, while A's store is
// being retried: each is turned away (409, or 503 while Redis does not
// answer) or gets the answer replayed, and the handler runs once.
func TestIdempotentDuplicatesRacingRetriedStoreRunOnce(t *testing.T) {
	e := newIdemEnv(t)
	b := &idemEnv{srv: e.srv, rdb: e.srv.Client(t), locker: locktest.NewClient(t, e.srv.Client(t))}
	g := newGate()
	opts := []IdempotencyOption{WithStoreTimeout(300 * time.Millisecond), WithIdempotencyAcquireTimeout(300 * time.Millisecond)}
	replicas := []*httptest.Server{replica(t, e, e.rdb, g.serve, opts...), replica(t, b, b.rdb, g.serve, opts...)}
	first, _ := e.stallFirstRun(t, replicas[0], g, "k", "b")
	(<-first).paid(t, "the first request")
	time.Sleep(500 * time.Millisecond) // the first store timed out; a retried attempt waits on Redis
	if n := retrying.Load(); n != 1 {
		t.Fatalf("%d stores being retried, want 1", n)
	}
	e.srv.Resume()
	replayed := false
	for round := 0; !replayed; round++ {
		if round == 100 {
			t.Fatal("no duplicate replayed after 100 rounds")
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, body, err := post(context.Background(), replicas[i%2], "k", "b")
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case resp.StatusCode == http.StatusOK && body == "paid" && resp.Header.Get(ReplayedHeader) == "true":
					mu.Lock()
					replayed = true
					mu.Unlock()
				case resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusServiceUnavailable:
				default:
					t.Errorf("a duplicate: %d %q replayed=%q, want 409, 503 or the answer replayed",
						resp.StatusCode, body, resp.Header.Get(ReplayedHeader))
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	if n := g.runs.Load(); n != 1 {
		t.Fatalf("%d runs of the handler, want 1", n)
	}
}
