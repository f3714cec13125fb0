package ginlock_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// No goroutine of the middleware outlives the lock Client's Close, also
// when releases are stuck on a stalled Redis as Close is called: once
// Close has returned, no background release of a request is left. (The
// release's unlock keeps its own 1 s bound on a single node, which Close
// does not cut; Close may return at its 800 ms deadline before it.)
func TestNoReleaseOutlivesCloseOnStalledRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locker, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = locker.Close()
		}
	})
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		if c.Query("stall") != "" {
			srv.Pause()
		}
		c.Status(http.StatusOK)
	})
	if w := post(r, "/orders/0/pay"); w.Code != http.StatusOK {
		t.Fatalf("warm-up: status %d", w.Code)
	}
	released(t)
	t.Cleanup(srv.Resume)
	if w := post(r, "/orders/1/pay?stall=1"); w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", w.Code)
	}
	if n := ginlock.ReleasesInFlight(); n != 1 {
		t.Fatalf("%d releases in flight, want 1", n)
	}
	start := time.Now()
	_ = locker.Close()
	closed = true
	took := time.Since(start)
	n := ginlock.ReleasesInFlight()
	srv.Resume()
	if n != 0 {
		t.Errorf("%d background releases still running after Close returned (Close took %v)", n, took)
	}
	released(t)
}
