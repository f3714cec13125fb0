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

// Two lock Clients on two Redis servers are two lock spaces: a release in
// flight on one (stalled) Redis does not hold back a request for the same
// key string on the other Client, whose Redis answers at once.
func TestReleaseWaitIsolatedBetweenClients(t *testing.T) {
	srvA, srvB := redistest.Start(t), redistest.Start(t)
	lockerA := locktest.NewClient(t, srvA.Client(t))
	lockerB := locktest.NewClient(t, srvB.Client(t))
	ok := func(c *gin.Context) { c.Status(http.StatusOK) }
	r := gin.New()
	r.POST("/a/orders/:id/pay", ginlock.New(lockerA, "orders:{id}"), func(c *gin.Context) {
		if c.Query("stall") != "" {
			srvA.Pause() // the release after this answer finds Redis A stalled
		}
		c.Status(http.StatusOK)
	})
	// A generous bound, so that a wait for A's release shows.
	r.POST("/b/orders/:id/pay", ginlock.New(lockerB, "orders:{id}", ginlock.WithAcquireTimeout(4*time.Second)), ok)
	for _, p := range []string{"/a/orders/1/pay", "/b/orders/1/pay"} { // connections and scripts ready
		if w := post(r, p); w.Code != http.StatusOK {
			t.Fatalf("warm-up %s: status %d", p, w.Code)
		}
	}
	released(t)
	t.Cleanup(srvA.Resume)

	if w := post(r, "/a/orders/1/pay?stall=1"); w.Code != http.StatusOK {
		t.Fatalf("A: status %d, want 200", w.Code)
	}
	if n := ginlock.ReleasesInFlight(); n != 1 {
		t.Fatalf("%d releases in flight after A's answer, want A's", n)
	}
	start := time.Now()
	w := post(r, "/b/orders/1/pay")
	took := time.Since(start)
	if w.Code != http.StatusOK {
		t.Fatalf("B: status %d, want 200", w.Code)
	}
	const bound = 300 * time.Millisecond // a round trip to B is a few ms
	if took > bound {
		t.Errorf("B, whose Redis answers, answered after %v, want within %v: it waited for Client A's release on stalled Redis A", took, bound)
	}
	srvA.Resume()
	released(t)
}
