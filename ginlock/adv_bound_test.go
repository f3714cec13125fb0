package ginlock_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// On a stalled Redis, a request that follows an answered one for the same
// key, whose release is still in flight, gets its 503 within its
// acquisition bound (1 s by default, or WithWait).
func TestStalledAcquisitionAfterAnsweredRequestWithinBound(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	const bound = time.Second
	ok := func(c *gin.Context) {
		if c.Query("stall") != "" {
			srv.Pause()
		}
		c.Status(http.StatusOK)
	}
	r := gin.New()
	r.POST("/try/:id", ginlock.New(locker, "orders:{id}"), ok)
	r.POST("/wait/:id", ginlock.New(locker, "orders:{id}", ginlock.WithWait(bound)), ok)
	for _, route := range []string{"try", "wait"} {
		if w := post(r, "/"+route+"/1"); w.Code != http.StatusOK {
			t.Fatalf("warm-up: status %d", w.Code)
		}
		released(t)
		if w := post(r, "/"+route+"/1?stall=1"); w.Code != http.StatusOK {
			t.Fatalf("status %d, want 200", w.Code)
		}
		start := time.Now()
		w := post(r, "/"+route+"/1")
		took := time.Since(start)
		srv.Resume()
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("%s: status %d on a stalled Redis, want 503", route, w.Code)
		}
		if took > bound+250*time.Millisecond {
			t.Errorf("%s: answered after %v, want within the acquisition bound %v (+250 ms)", route, took, bound)
		}
		t.Logf("%s: %d after %v", route, w.Code, took)
		released(t)
	}
}
