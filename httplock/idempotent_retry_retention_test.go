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

// TestIdempotentFailingStoreEndsAtRetention keeps answers
// in another Redis than the run lock's, which renews the hold, and makes
// every store fail with an error that passes: the answers' Redis is a
// replica (READONLY: a demoted primary after a failover), or it is
// stopped (SIGSTOP) for good. The store is retried, but not past the
// answer's retention (an answer stored then would have expired
// already): the retries end and the run lock is released. Against the
// replica, which reads, a retry of the request then runs the handler
// again, as after any answer that was not stored.
func TestIdempotentFailingStoreEndsAtRetention(t *testing.T) {
	for _, stopped := range []bool{false, true} {
		t.Run(map[bool]string{false: "read-only", true: "stopped"}[stopped], func(t *testing.T) {
			e := newIdemEnv(t)
			var other *redistest.Server
			if stopped {
				other = redistest.Start(t)
			} else {
				other = redistest.StartReplica(t, e.srv.Server)
			}
			answers := other.Client(t)
			const retention = 1500 * time.Millisecond
			var runs atomic.Int64
			s := replica(t, e, answers, func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				if stopped {
					other.Pause()
				}
				_, _ = io.WriteString(w, "paid")
			}, WithRetention(retention), WithStoreTimeout(200*time.Millisecond))
			if stopped {
				t.Cleanup(other.Resume)
			}
			resp, body, err := post(context.Background(), s, "k", "b")
			if err != nil || resp.StatusCode != http.StatusOK || body != "paid" {
				t.Fatalf("first request: %v %v %q, want the handler's answer", resp, err, body)
			}
			e.checkOutcomes(t, "store-failed")
			if n := retrying.Load(); n != 1 {
				t.Fatalf("%d stores being retried, want 1", n)
			}
			locktest.Eventually(t, retention+locktest.Bound(time.Second), "the retries to end", func() bool {
				return retrying.Load() == 0
			})
			waitReleased(t)
			if stopped {
				_, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
				_, unlock, err := e.locker.TryLock(context.Background(), run)
				if err != nil {
					t.Fatalf("the run lock is held after the retries ended: %v", err)
				}
				_ = unlock()
				return
			}
			resp, body, err = post(context.Background(), s, "k", "b")
			if err != nil || resp.StatusCode != http.StatusOK || body != "paid" || runs.Load() != 2 {
				t.Fatalf("retry after the retries ended: %v %v %q after %d runs, want the handler's answer after 2",
					resp, err, body, runs.Load())
			}
		})
	}
}
