package ginlock_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// A stalled Redis is never answered as contention: when the request's
// deadline (a timeout middleware's, shorter than the acquisition bound)
// ends the acquisition on a stalled Redis, nobody holds the key, so the
// answer is not a conflict, and the failure reaches c.Error.
func TestStalledRedisUnderRequestDeadlineIsNotAConflict(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	var errs []error
	r := gin.New()
	r.Use(errorsOf(&errs), func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 300*time.Millisecond)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	})
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) { c.Status(http.StatusOK) })
	if w := post(r, "/orders/1/pay"); w.Code != http.StatusOK {
		t.Fatalf("warm-up: status %d", w.Code)
	}
	released(t)
	srv.Pause()
	t.Cleanup(srv.Resume)
	w := post(r, "/orders/2/pay")
	srv.Resume()
	if w.Code == http.StatusConflict {
		t.Errorf("stalled Redis answered %d (key held), want 503: nobody holds orders:2", w.Code)
	}
	if len(errs) == 0 {
		t.Error("the stalled Redis reached no c.Error: the outage is invisible")
	}
	t.Logf("status %d, errors %v", w.Code, errs)
}
