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

// Two replicas, each with a lock Client of its own behind a real
// http.Server, serve reads (RLock) and writes (New) of one key under
// load: a write never runs beside another write or a read, and every
// request is served after its wait.
func TestReadersAndWritersAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	const replicas, requests = 2, 48
	var readers, writers atomic.Int32
	var violated atomic.Bool
	check := func() {
		if w := writers.Load(); w > 1 || w == 1 && readers.Load() > 0 {
			violated.Store(true)
		}
	}
	read := func(w http.ResponseWriter, r *http.Request) {
		readers.Add(1)
		check()
		time.Sleep(2 * time.Millisecond)
		check()
		readers.Add(-1)
		ok(w, r)
	}
	write := func(w http.ResponseWriter, r *http.Request) {
		writers.Add(1)
		check()
		time.Sleep(2 * time.Millisecond)
		check()
		writers.Add(-1)
		ok(w, r)
	}
	var servers [replicas]*httptest.Server
	for i := range servers {
		locker := locktest.NewClient(t, srv.Client(t))
		wait := httplock.WithWait(locktest.Bound(20 * time.Second))
		mux := http.NewServeMux()
		mux.Handle("GET /c/{id}", httplock.RLock(locker, "c:{id}", wait)(http.HandlerFunc(read)))
		mux.Handle("PUT /c/{id}", httplock.New(locker, "c:{id}", wait)(http.HandlerFunc(write)))
		servers[i] = httptest.NewServer(mux)
		defer servers[i].Close()
	}
	var wg sync.WaitGroup
	for i := range requests {
		hs := servers[i%replicas]
		method := http.MethodGet
		if i%3 == 0 {
			method = http.MethodPut
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(method, fmt.Sprintf("%s/c/1", hs.URL), nil)
			resp, err := hs.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: status %d, want 200 after the wait", method, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	released(t)
	if violated.Load() {
		t.Fatal("a write ran beside another write or a read")
	}
}

// Limit on two replicas with a Client each, under load: never more than
// limit handlers of one key run at once, and every request is served
// after its wait.
func TestLimitAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	const replicas, requests, limit = 2, 40, 3
	var running, most atomic.Int32
	report := func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		ok(w, r)
	}
	var servers [replicas]*httptest.Server
	for i := range servers {
		locker := locktest.NewClient(t, srv.Client(t))
		mw := httplock.Limit(locker, "reports:{id}", limit, httplock.WithWait(locktest.Bound(20*time.Second)))
		servers[i] = httptest.NewServer(route("POST /reports/{id}", mw, report))
		defer servers[i].Close()
	}
	var wg sync.WaitGroup
	for i := range requests {
		hs := servers[i%replicas]
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := hs.Client().Post(hs.URL+"/reports/1", "", nil)
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
	if m := most.Load(); m > limit {
		t.Fatalf("%d handlers ran at once, want at most %d", m, limit)
	}
}
