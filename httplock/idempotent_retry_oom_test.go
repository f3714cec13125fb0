package httplock

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// TestIdempotentOutOfMemoryReleasesRunLock runs the handler and then makes Redis
// refuse writes (maxmemory 1 byte, noeviction), so the store is answered
// OOM, an error reply that does not pass by itself: it is not retried,
// the run lock is released, no goroutine is left, and the log says Redis
// refused the answer. A retry of the request while Redis stays out of
// memory is answered 503 without running the handler (the run lock
// cannot be written); once Redis has memory again, the retry runs the
// handler anew, as after any answer that was not stored.
func TestIdempotentOutOfMemoryReleasesRunLock(t *testing.T) {
	e := newIdemEnv(t)
	ctx := context.Background()
	var runs atomic.Int64
	var logs locktest.SyncBuffer
	s := replica(t, e, e.rdb, func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if err := e.rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
			t.Error(err)
		}
		if err := e.rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Error(err)
		}
		_, _ = io.WriteString(w, "paid")
	}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	resp, body, err := post(ctx, s, "k", "b")
	if err != nil || resp.StatusCode != http.StatusOK || body != "paid" {
		t.Fatalf("first request: %v %v %q, want the handler's answer", resp, err, body)
	}
	e.checkOutcomes(t, "store-failed")
	if n := retrying.Load(); n != 0 {
		t.Fatalf("%d stores being retried after OOM, want none", n)
	}
	waitReleased(t)
	checkStallLogs(t, logs.String(), "OOM", "retrying=false")
	resp, body, err = post(ctx, s, "k", "b")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || runs.Load() != 1 {
		t.Fatalf("retry while out of memory: %v %v %q after %d runs, want 503 after 1 run", resp, err, body, runs.Load())
	}
	if err := e.rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	resp, body, err = post(ctx, s, "k", "b")
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get(ReplayedHeader) == "true" || runs.Load() != 2 {
		t.Fatalf("retry with memory again: %v %v %q after %d runs, want the handler's answer after 2 runs", resp, err, body, runs.Load())
	}
}
