package httplock

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// TestIdempotentReviewReadOnlyStoreEndsAtRetention keeps answers in a
// Redis that answers every write with READONLY (a replica: a demoted
// primary after a failover, another deployment than the locker's) while
// the run lock's Redis renews the hold: READONLY passes in a failover,
// so the store is retried, but not past the answer's retention (an
// answer stored then would have expired already). The retries end, the
// run lock is released, and a retry of the request runs the handler
// again, as after any answer that was not stored.
func TestIdempotentReviewReadOnlyStoreEndsAtRetention(t *testing.T) {
	e := newIdemEnv(t)
	ro := redistest.StartReplica(t, e.srv.Server).Client(t)
	const retention = 1500 * time.Millisecond
	var runs atomic.Int64
	s := replica(t, e, ro, func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		_, _ = io.WriteString(w, "paid")
	}, WithRetention(retention), WithStoreTimeout(200*time.Millisecond))
	resp, body, err := post(context.Background(), s, "k", "b")
	if err != nil || resp.StatusCode != http.StatusOK || body != "paid" {
		t.Fatalf("first request: %v %v %q, want the handler's answer", resp, err, body)
	}
	e.checkOutcomes(t, "store-failed")
	if n := retrying.Load(); n != 1 {
		t.Fatalf("%d stores being retried after READONLY, want 1", n)
	}
	locktest.Eventually(t, retention+locktest.Bound(time.Second), "the retries to end", func() bool {
		return retrying.Load() == 0
	})
	waitReleased(t)
	resp, body, err = post(context.Background(), s, "k", "b")
	if err != nil || resp.StatusCode != http.StatusOK || body != "paid" || runs.Load() != 2 {
		t.Fatalf("retry after the retries ended: %v %v %q after %d runs, want the handler's answer after 2", resp, err, body, runs.Load())
	}
}
