package otellock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestStalledRedisIsNotContention: when Redis stops answering, ginlock
// answers 503 "the lock service is unavailable", and otellock records the
// acquisition as outcome error with an error.type, not as timeout, which
// docs/observability.md counts as contention: an SRE must not see
// contention on orders:{id} during a Redis outage, and no error at all.
// The same holds for a TryLock bounded by lock.WithMaxWait (ginlock sets
// the wait limit from its acquire timeout) while Redis does not answer.
func TestStalledRedisIsNotContention(t *testing.T) {
	gin.SetMode(gin.TestMode)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}", ginlock.WithAcquireTimeout(300*time.Millisecond)),
		func(c *gin.Context) { c.Status(http.StatusNoContent) })

	srv.Pause()
	defer srv.Resume()
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("request with Redis stalled: %d, want 503", w.Code)
	}
	s := tel.only(t, "lock.acquire")
	outcome := attr(t, s, aAcquireOutcome).AsString()
	if outcome != "error" || !hasAttr(s, aErrorType) {
		t.Errorf("lock.acquire of a request answered 503 (Redis stalled): outcome %q, attributes %v; want outcome error with error.type", outcome, s.Attributes())
	}

	// The same with the lock package alone: a TryLock bounded by
	// lock.WithMaxWait while Redis does not answer.
	if _, _, err := locker.TryLock(context.Background(), "orders:43", lock.WithMaxWait(300*time.Millisecond)); err == nil {
		t.Fatal("TryLock with Redis stalled succeeded")
	}
	for _, s := range tel.ended("lock.acquire")[1:] {
		if o := attr(t, s, aAcquireOutcome).AsString(); o != "error" {
			t.Errorf("TryLock with WithMaxWait, Redis stalled: outcome %q, want error", o)
		}
	}
}
