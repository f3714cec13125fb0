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

// The acquisition bound holds for a re-entry too: a route's ginlock.New
// with a 200 ms bound, inside its group's New of the same key, answers
// 503 within about 200 ms when Redis stalls between the two.
func TestReentryOnStalledRedisWithinItsBound(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	const bound = 200 * time.Millisecond
	var inner time.Duration
	r := gin.New()
	g := r.Group("/orders/:id", ginlock.New(locker, "orders:{id}"))
	g.POST("/pay", func(c *gin.Context) {
		if c.Query("stall") != "" {
			srv.Pause()
		}
		start := time.Now()
		c.Next()
		inner = time.Since(start)
	}, ginlock.New(locker, "orders:{id}", ginlock.WithAcquireTimeout(bound)), func(c *gin.Context) { c.Status(http.StatusOK) })
	if w := post(r, "/orders/1/pay"); w.Code != http.StatusOK {
		t.Fatalf("warm-up: status %d", w.Code)
	}
	released(t)
	t.Cleanup(srv.Resume)
	w := post(r, "/orders/1/pay?stall=1")
	srv.Resume()
	t.Logf("status %d, inner acquisition answered after %v", w.Code, inner)
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", w.Code)
	}
	if inner > bound+150*time.Millisecond {
		t.Errorf("the re-entry answered after %v, want within its bound %v", inner, bound)
	}
	released(t)
}
