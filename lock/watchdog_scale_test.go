package lock_test

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// The watchdog under CPU load: many leases kept while busy loops compete
// for the cores (not parallel: it loads the CPU on purpose).

// busyLoops starts n shell busy loops, `while :; do :; done`, which keep
// n cores busy, and kills them by pid when the test ends.
func busyLoops(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// renewalRecorder is an Observer that sums the watchdog's batches.
type renewalRecorder struct {
	recorder
	mu              sync.Mutex
	batches, leases int
	errs, lost      int
	longest         time.Duration
	firstErr        error
	losses          map[lock.Loss]int
}

func (r *renewalRecorder) Renewed(rn lock.Renewal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches++
	r.leases += rn.Leases
	r.lost += rn.Lost
	if rn.Err != nil {
		r.errs++
		if r.firstErr == nil {
			r.firstErr = rn.Err
		}
	}
	r.longest = max(r.longest, rn.Duration)
}

func (r *renewalRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d batches, %d leases, %d lost, %d with errors (first: %v), longest %v; losses %v",
		r.batches, r.leases, r.lost, r.errs, r.firstErr, r.longest.Round(time.Millisecond), r.losses)
}

// Released counts the hold levels lost, by reason.
func (r *renewalRecorder) Released(ctx context.Context, rel lock.Release) {
	if rel.Cause == lock.ErrLost {
		r.mu.Lock()
		r.losses[rel.Loss]++
		r.mu.Unlock()
	}
}

// TestWatchdogKeepsManyLeasesUnderCPULoad ("the watchdog keeps its leases
// while Redis answers and the process gets a fair share of a core"): one
// Client holds many keys with a 3 s lease while busy loops compete with
// the test and Redis for the cores; no lease may be lost, and every
// unlock must succeed. LOCKKIT_TIMING=1 (CI) runs the full size, 20,000
// holds of 3 s for 12 s; otherwise 5,000 holds of 1.5 s for 8 s (of 3 s
// under the race detector, which slows every renewal batch several
// times); all with three busy loops. The watchdog sends a slow renewal
// batch once, not again every quarter interval: a batch sent again would
// lose leases here.
func TestWatchdogKeepsManyLeasesUnderCPULoad(t *testing.T) {
	holds, loops, hold, lease := 5000, 3, 8*time.Second, 1500*time.Millisecond
	switch {
	case locktest.Tight():
		holds, loops, hold, lease = 20000, 3, 12*time.Second, 3*time.Second
	case locktest.RaceEnabled:
		lease = 3 * time.Second
	}
	srv, _ := newReal(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	rec := &renewalRecorder{losses: map[lock.Loss]int{}}
	c := locktest.NewClient(t, rdb, lock.WithDefaultLease(lease), lock.WithObserver(rec))
	busyLoops(t, loops)
	ctxs := make([]context.Context, holds)
	unlocks := make([]lock.UnlockFunc, holds)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	start := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= holds {
					return
				}
				ctx, unlock, err := c.Lock(context.Background(), "scale-"+strconv.Itoa(i))
				if err != nil {
					failed.Add(1)
					continue
				}
				ctxs[i], unlocks[i] = ctx, unlock
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d Lock calls failed", n, holds)
	}
	t.Logf("%d holds taken in %v with %d busy loops on %d cores", holds, time.Since(start).Round(time.Millisecond), loops, runtime.NumCPU())
	time.Sleep(hold)
	lost := 0
	for _, ctx := range ctxs {
		if ctx.Err() != nil {
			lost++
		}
	}
	unlocking := time.Now()
	var unlockErrs atomic.Int64
	var firstErr atomic.Value
	next.Store(0)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= holds {
					return
				}
				if err := unlocks[i](); err != nil {
					unlockErrs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d unlocks in %v; renewal batches: %s", holds, time.Since(unlocking).Round(time.Millisecond), rec)
	if lost > 0 || unlockErrs.Load() > 0 {
		t.Errorf("%d of %d holds lost within %v, %d unlocks failed (first: %v)", lost, holds, hold, unlockErrs.Load(), firstErr.Load())
	}
}
