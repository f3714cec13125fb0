package httplock_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// Two replicas, each with a lock Client of its own on one Redis, behind
// real http.Servers: the requests for one order never run together, and
// each got a larger fencing token than the one before it.
func TestExclusionAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	const clients, perClient, orders = 2, 8, 2
	var (
		running [orders]atomic.Int32
		mu      sync.Mutex
		tokens  [orders][]uint64
		overlap atomic.Bool
	)
	pay := func(w http.ResponseWriter, r *http.Request) {
		var o int
		_, _ = fmt.Sscan(r.PathValue("id"), &o)
		if running[o].Add(1) != 1 {
			overlap.Store(true)
		}
		tok, _ := httplock.FencingToken(r)
		mu.Lock()
		tokens[o] = append(tokens[o], tok)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // work under the lock
		running[o].Add(-1)
		ok(w, r)
	}
	var replicas [clients]*httptest.Server
	for i := range replicas {
		locker := locktest.NewClient(t, srv.Client(t))
		mw := httplock.New(locker, "orders:{id}", httplock.WithWait(locktest.Bound(10*time.Second)))
		replicas[i] = httptest.NewServer(route("POST /orders/{id}/pay", mw, pay))
		defer replicas[i].Close()
	}
	var wg sync.WaitGroup
	for i := range clients * perClient * orders {
		hs := replicas[i%clients]
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := hs.Client().Post(fmt.Sprintf("%s/orders/%d/pay", hs.URL, i%orders), "", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200 after the wait", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	released(t)
	if overlap.Load() {
		t.Fatal("two requests for one order ran together")
	}
	for o, ts := range tokens {
		if len(ts) != clients*perClient {
			t.Fatalf("order %d: %d runs, want %d", o, len(ts), clients*perClient)
		}
		for i := 1; i < len(ts); i++ {
			if ts[i] <= ts[i-1] {
				t.Fatalf("order %d: fencing tokens %v not increasing", o, ts)
			}
		}
	}
}
