package ginlock_test

import (
	"context"
	"errors"
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

var errSlow = errors.New("adv: the request took too long")

// The handler's context under a deadline a middleware set on the request
// (context.WithTimeoutCause) behaves as the request's at that deadline:
// the same Deadline, done at it, Err DeadlineExceeded, and the
// middleware's cause, under New and under Wrap.
func TestHandlerContextDeadlineMatchesRequest(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	const d = 300 * time.Millisecond
	type seen struct {
		got, doneAt time.Time
		err, cause  error
	}
	res := make(chan seen, 1)
	timeout := func(c *gin.Context) {
		ctx, cancel := context.WithTimeoutCause(c.Request.Context(), d, errSlow)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
	handler := func(c *gin.Context) {
		ctx := c.Request.Context()
		var s seen
		s.got, _ = ctx.Deadline()
		<-ctx.Done()
		s.doneAt = time.Now()
		s.err, s.cause = ctx.Err(), context.Cause(ctx)
		res <- s
		c.Status(http.StatusOK)
	}
	r := gin.New()
	r.POST("/new/orders/:id/pay", timeout, ginlock.New(locker, "orders:{id}"), handler)
	r.POST("/wrap/orders/:id/pay", timeout, ginlock.Wrap(locker, "orders:{id}", handler))
	// Connection and scripts ready: on a loaded machine the first
	// acquisition, with its dial, can outlast the request's 300 ms.
	r.POST("/warm/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) { c.Status(http.StatusOK) })
	if w := post(r, "/warm/orders/1/pay"); w.Code != http.StatusOK {
		t.Fatalf("warm-up: status %d", w.Code)
	}
	released(t)
	for _, p := range []string{"/new/orders/1/pay", "/wrap/orders/1/pay"} {
		start := time.Now()
		w := post(r, p)
		var s seen
		select {
		case s = <-res:
		default:
			t.Fatalf("%s: the handler did not run: status %d, body %s", p, w.Code, w.Body)
		}
		if want := start.Add(d); s.got.Before(start) || s.got.After(want.Add(50*time.Millisecond)) {
			t.Errorf("%s: handler's Deadline %v, want the request's, about %v", p, s.got, want)
		}
		if !errors.Is(s.err, context.DeadlineExceeded) {
			t.Errorf("%s: handler's ctx.Err() at the deadline = %v, want context.DeadlineExceeded", p, s.err)
		}
		if s.cause != errSlow {
			t.Errorf("%s: handler's context.Cause at the deadline = %v, want the middleware's %v", p, s.cause, errSlow)
		}
		if s.doneAt.Before(s.got) {
			t.Errorf("%s: handler's context done at %v, before its deadline %v", p, s.doneAt, s.got)
		}
		released(t)
	}
}

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
