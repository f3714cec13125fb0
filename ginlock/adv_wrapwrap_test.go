package ginlock_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// A Wrap detached inside another Wrap of the same key, itself inside the
// route group's New of that key, holds the key while its handler runs:
// the outer Wrap and New return first (the timeout answered 504), and
// the key stays taken until the inner handler has returned, then is
// free.
func TestWrapInsideDetachedWrapHoldsWhileInnerRuns(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	other := locktest.NewClient(t, srv.Client(t))
	const work = 300 * time.Millisecond
	type seen struct{ held bool }
	res := make(chan seen, 1)
	inner := ginlock.Wrap(locker, "orders:{id}", func(c *gin.Context) {
		time.Sleep(work)
		res <- seen{lock.Held(c.Request.Context(), ginlock.Key(c))}
	})
	r := gin.New()
	g := r.Group("/orders/:id", ginlock.New(locker, "orders:{id}"))
	g.POST("/pay", ginlock.Wrap(locker, "orders:{id}", detach(30*time.Millisecond, inner)))
	start := time.Now()
	if w := post(r, "/orders/2/pay"); w.Code != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504", w.Code)
	}
	waitFor(t, 2*time.Second, "the outer releases", func() bool { return ginlock.ReleasesInFlight() == 0 })
	time.Sleep(work / 3)
	if time.Since(start) > work*2/3 {
		t.Fatal("too slow to look while the inner handler runs")
	}
	if _, unlock, err := other.TryLock(t.Context(), "orders:2"); err == nil {
		_ = unlock()
		t.Error("the key was free while the inner wrapped handler ran")
	}
	if s := <-res; !s.held {
		t.Error("the inner wrapped handler lost the key while it ran")
	}
	// The handler told us just before returning; the releases follow in
	// the background.
	waitFor(t, 2*time.Second, "the key free once every handler returned", func() bool {
		_, unlock, err := other.TryLock(t.Context(), "orders:2")
		if err == nil {
			_ = unlock()
		}
		return err == nil
	})
	released(t)
}
