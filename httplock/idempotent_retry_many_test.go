package httplock

import (
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// cpuTicks returns the CPU time this process used so far, user and
// system, in clock ticks (/proc/self/stat).
func cpuTicks(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc/self/stat")
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// TestIdempotentManyStalledRunsEachStoredOnce stops Redis (SIGSTOP) under 200
// runs at once, for longer than the store timeout: every store is
// retried, one goroutine each, and once Redis resumes every answer is
// stored, the retries end and a retry of each request is replayed: no
// handler ran twice. The CPU the stalled runs' hold checks cost is
// logged (clock ticks of /proc/self/stat over 2 s).
func TestIdempotentManyStalledRunsEachStoredOnce(t *testing.T) {
	const n = 200
	e := newIdemEnv(t)
	var started sync.WaitGroup
	started.Add(n)
	proceed := make(chan struct{})
	var runs atomic.Int64
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) <= n {
			started.Done()
			<-proceed
		}
		_, _ = io.WriteString(w, "paid "+r.PathValue("id"))
	}, WithStoreTimeout(200*time.Millisecond), WithIdempotencyAcquireTimeout(5*time.Second),
		WithIdempotencyLockOptions(lock.WithLease(locktest.Bound(20*time.Second))))
	var done sync.WaitGroup
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			if w := serve(h, pay(strconv.Itoa(i), "k"+strconv.Itoa(i), "")); w.Code != http.StatusOK {
				t.Errorf("request %d: %d %q, want the handler's answer", i, w.Code, w.Body)
			}
		}()
	}
	started.Wait()
	e.srv.Pause()
	t.Cleanup(e.srv.Resume)
	close(proceed)
	done.Wait()
	if got := retrying.Load(); got != n {
		t.Fatalf("%d stores being retried, want %d", got, n)
	}
	c0, t0 := cpuTicks(t), time.Now()
	time.Sleep(2 * time.Second)
	t.Logf("%d stalled runs: %d clock ticks of CPU in %v", retrying.Load(), cpuTicks(t)-c0, time.Since(t0).Round(time.Millisecond))
	e.srv.Resume()
	waitReleased(t)
	for i := range n {
		w := serve(h, pay(strconv.Itoa(i), "k"+strconv.Itoa(i), ""))
		if w.Code != http.StatusOK || w.Body.String() != "paid "+strconv.Itoa(i) || w.Header().Get(ReplayedHeader) != "true" {
			t.Fatalf("retry %d: %d %q replayed=%q, want the answer replayed", i, w.Code, w.Body, w.Header().Get(ReplayedHeader))
		}
	}
	if got := runs.Load(); got != n {
		t.Fatalf("%d runs of the handler for %d keys, want one each", got, n)
	}
}
