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

// New holds its lock exactly while its chain runs, also when a Wrap of
// the same key string on another lock Client (another Redis, another
// lock) runs detached inside it: New's key on its Redis is free once
// its chain returned, while the Wrap still holds its own.
func TestNewNotHeldPastChainByWrapOfAnotherClient(t *testing.T) {
	srvA, srvB := redistest.Start(t), redistest.Start(t)
	lockerA := locktest.NewClient(t, srvA.Client(t))
	lockerB := locktest.NewClient(t, srvB.Client(t))
	probeA := locktest.NewClient(t, srvA.Client(t))
	const work = 400 * time.Millisecond
	heldB := make(chan bool, 1)
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(lockerA, "orders:{id}"), detach(30*time.Millisecond, ginlock.Wrap(lockerB, "orders:{id}", func(c *gin.Context) {
		time.Sleep(work)
		heldB <- lock.Held(c.Request.Context(), "orders:1")
	})))
	start := time.Now()
	if w := post(r, "/orders/1/pay"); w.Code != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504", w.Code)
	}
	waitFor(t, work/2, "A's key free once New's chain returned", func() bool {
		_, unlock, err := probeA.TryLock(t.Context(), "orders:1")
		if err == nil {
			_ = unlock()
		}
		return err == nil
	})
	if time.Since(start) > work {
		t.Fatal("too slow to tell")
	}
	if !<-heldB {
		t.Error("the Wrap on Client B did not hold its key while it ran")
	}
	released(t)
}
