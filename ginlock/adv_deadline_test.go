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
	for _, p := range []string{"/new/orders/1/pay", "/wrap/orders/1/pay"} {
		start := time.Now()
		post(r, p)
		s := <-res
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
