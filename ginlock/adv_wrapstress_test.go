package ginlock_test

import (
	"math/rand/v2"
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
)

// Exclusion of wrapped handlers: with three replicas on one Redis, each a
// route group's New and, behind a timeout that detaches the handler as
// it answers 504, a Wrap of the same key, no two pays of one order ever
// run at once, whichever request times out, over real HTTP.
func TestWrappedPaysOfOneOrderNeverOverlap(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	running := map[string]int{}
	overlaps, pays := 0, 0
	pay := func(c *gin.Context) {
		id := c.Param("id")
		mu.Lock()
		if running[id]++; running[id] > 1 {
			overlaps++
		}
		pays++
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(80)) * time.Millisecond)
		mu.Lock()
		running[id]--
		mu.Unlock()
		c.Status(http.StatusOK)
	}
	var urls []string
	for range 3 {
		locker := locktest.NewClient(t, srv.Client(t))
		r := gin.New()
		g := r.Group("/orders/:id", ginlock.New(locker, "orders:{id}", ginlock.WithWait(2*time.Second)))
		g.POST("/pay", detach(40*time.Millisecond, ginlock.Wrap(locker, "orders:{id}", pay)))
		hs := httptest.NewServer(r)
		t.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	codes := make(chan int, 60)
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(urls[i%3]+"/orders/"+strconv.Itoa(i%3)+"/pay", "", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	waitFor(t, 10*time.Second, "every pay to return", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running["0"]+running["1"]+running["2"] == 0
	})
	released(t)
	t.Logf("answers %v, pays %d", count, pays)
	if overlaps != 0 {
		t.Errorf("%d pays started while another pay of the order ran", overlaps)
	}
	if count[http.StatusGatewayTimeout] == 0 {
		t.Error("no request timed out: the test proves nothing")
	}
}
