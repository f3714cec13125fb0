package ginlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Wrap runs its handler only holding the key: behind a timeout that
// answers before the detached handler even starts, inside a route
// group's New of the same key, a Wrap must not ride the group's hold that
// is being released as the chain returned. Every pay that runs starts
// holding the key, its context not ended by the lock (a cause matching
// lock.ErrNotHeld), so no two pays of an order overlap.
func TestWrapNeverRunsHandlerWithoutTheLock(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	running := map[string]int{}
	pays, unheld, overlaps := 0, 0, 0
	var causes []error
	pay := func(c *gin.Context) {
		id, ctx := c.Param("id"), c.Request.Context()
		mu.Lock()
		pays++
		// context.Canceled with the key held is the request ending (as
		// on a disconnect), not the lock.
		if !lock.Held(ctx, ginlock.Key(c)) || errors.Is(context.Cause(ctx), lock.ErrNotHeld) {
			unheld++
			causes = append(causes, fmt.Errorf("%s held=%v err=%v: %w", c.FullPath(), lock.Held(ctx, ginlock.Key(c)), ctx.Err(), context.Cause(ctx)))
		}
		if running[id]++; running[id] > 1 {
			overlaps++
		}
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		running[id]--
		mu.Unlock()
	}
	var urls []string
	for range 2 {
		locker := locktest.NewClient(t, srv.Client(t))
		r := gin.New()
		g := r.Group("/orders/:id", ginlock.New(locker, "orders:{id}", ginlock.WithWait(2*time.Second)))
		g.POST("/pay", detach(0, ginlock.Wrap(locker, "orders:{id}", pay)))
		g.POST("/pay-in-time", detach(10*time.Second, ginlock.Wrap(locker, "orders:{id}", pay)))
		hs := httptest.NewServer(r)
		t.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/pay"
			if i%4 == 0 {
				path = "/pay-in-time" // so that some pays run
			}
			resp, err := client.Post(urls[i%2]+"/orders/"+strconv.Itoa(i%2)+path, "", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	waitFor(t, 10*time.Second, "every pay to return", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running["0"]+running["1"] == 0
	})
	released(t)
	t.Logf("pays %d, without the lock %d, overlapping %d", pays, unheld, overlaps)
	if pays == 0 {
		t.Fatal("no pay ran: the test proves nothing")
	}
	if unheld != 0 {
		t.Errorf("%d of %d pays ran without holding the key (causes %v)", unheld, pays, causes[:min(len(causes), 3)])
	}
	if overlaps != 0 {
		t.Errorf("%d pays started while another pay of the order ran", overlaps)
	}
}
