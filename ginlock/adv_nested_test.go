package ginlock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Wrap holds its key while the handler it wraps runs, on whatever
// goroutine runs it, also when a ginlock.New of the same key (a route
// group's) comes before the detaching timeout middleware: a client's
// retry, on another replica, is turned away while the first payment still
// runs, and the payment's lock context stays live until it returns.
func TestWrapInsideNewOfSameKeyHoldsWhileHandlerRuns(t *testing.T) {
	srv := redistest.Start(t)
	const timeout, work = 200 * time.Millisecond, time.Second
	var running, overlaps atomic.Int32
	type seen struct {
		held  bool
		cause error
	}
	first := make(chan seen, 1)
	pay := func(c *gin.Context) {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		ctx := c.Request.Context()
		time.Sleep(work) // the card network
		select {
		case first <- seen{lock.Held(ctx, ginlock.Key(c)), context.Cause(ctx)}:
		default:
		}
		c.Status(http.StatusOK)
	}
	var urls [2]string
	for i := range urls {
		locker := locktest.NewClient(t, srv.Client(t))
		r := gin.New()
		g := r.Group("/orders/:id", ginlock.New(locker, "orders:{id}"))
		g.POST("/pay", detach(timeout, ginlock.Wrap(locker, "orders:{id}", pay)))
		g.GET("/", func(c *gin.Context) { c.Status(http.StatusOK) })
		hs := httptest.NewServer(r)
		t.Cleanup(hs.Close)
		urls[i] = hs.URL
	}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	send := func(method, url string) int {
		req, _ := http.NewRequest(method, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, u := range urls { // connections and scripts ready
		if code := send(http.MethodGet, u+"/orders/0/"); code != http.StatusOK {
			t.Fatalf("warm-up: status %d", code)
		}
	}
	if code := send(http.MethodPost, urls[0]+"/orders/1/pay"); code != http.StatusGatewayTimeout {
		t.Fatalf("first pay: status %d, want 504", code)
	}
	waitFor(t, 2*time.Second, "the first pay's release", func() bool { return ginlock.ReleasesInFlight() == 0 })
	retry := send(http.MethodPost, urls[1]+"/orders/1/pay")
	s := <-first
	waitFor(t, 5*time.Second, "every pay to return", func() bool { return running.Load() == 0 })
	if retry != http.StatusConflict {
		t.Errorf("retry while the wrapped pay ran: status %d, want 409", retry)
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d pays of order 1 ran at once", n+1)
	}
	if !s.held {
		t.Errorf("the wrapped pay's lock ended while it ran (cause %v)", s.cause)
	}
	released(t)
}
