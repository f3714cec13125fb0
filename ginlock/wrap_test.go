package ginlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
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
