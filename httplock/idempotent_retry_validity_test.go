package httplock

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// TestIdempotentResumeJustBeforeValidityRunsOnce stops Redis (SIGSTOP)
// while the handler runs and resumes it 200 ms before the run lock's
// validity ends (a fixed lease: the validity ends lease less the drift
// allowance after the acquisition, whatever Redis does): the store's
// retries, 100 ms apart, land within the validity, and a retry of the
// request once they ended gets the answer replayed: the handler ran
// once. Rows: the store script is in Redis's script cache or not (then
// the attempt Redis got while stopped ends in NOSCRIPT).
func TestIdempotentResumeJustBeforeValidityRunsOnce(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(map[bool]string{false: "script not cached", true: "script cached"}[cached], func(t *testing.T) {
			e := newIdemEnv(t)
			if cached {
				if err := storeScript.Load(context.Background(), e.rdb).Err(); err != nil {
					t.Fatal(err)
				}
			}
			const lease, margin = 1500 * time.Millisecond, 200 * time.Millisecond
			g := newGate()
			s := replica(t, e, e.rdb, g.serve, WithStoreTimeout(300*time.Millisecond), WithIdempotencyAcquireTimeout(300*time.Millisecond),
				WithIdempotencyLockOptions(lock.WithFixedLease(lease)))
			sent := time.Now() // before the acquisition: its validity ends later
			first, _ := e.stallFirstRun(t, s, g, "k", "b")
			(<-first).paid(t, "the first request")
			e.checkOutcomes(t, "store-failed")
			time.Sleep(time.Until(sent.Add(lease - margin)))
			e.srv.Resume()
			waitReleased(t)
			resp, body, err := post(context.Background(), s, "k", "b")
			if err != nil || resp.StatusCode != http.StatusOK || body != "paid" || resp.Header.Get(ReplayedHeader) != "true" || g.runs.Load() != 1 {
				t.Fatalf("retry once the retries ended: %v %v %q after %d runs, want the answer replayed after 1 run",
					resp, err, body, g.runs.Load())
			}
		})
	}
}
