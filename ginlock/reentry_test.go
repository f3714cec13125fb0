package ginlock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// A handler re-enters its route's key with c.Request.Context() after the
// client went away: the context is cancelled but still holds the key, so
// the re-entry succeeds (no ErrNotObtained to map to 409), and its unlock
// leaves the route's hold in place.
func TestReentryAfterClientDisconnect(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locker := locktest.NewClient(t, rdb)

	entered := make(chan struct{})
	type result struct {
		err        error
		heldAfter  bool
		innerCause error
	}
	res := make(chan result, 1)
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		ctx := c.Request.Context()
		close(entered)
		<-ctx.Done() // the client went away; the route's lock is still held
		key := ginlock.Key(c)
		ictx, unlock, err := locker.Lock(ctx, key)
		if err != nil {
			res <- result{err: err}
			return
		}
		cause := context.Cause(ictx)
		err = unlock()
		res <- result{err: err, heldAfter: lock.Held(ctx, key), innerCause: cause}
	})
	hs := httptest.NewServer(r)
	defer hs.Close()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/orders/7/pay", nil)
	go func() {
		<-entered
		cancel()
	}()
	if resp, err := hs.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded, want it cancelled")
	}
	got := <-res
	if got.err != nil {
		t.Fatalf("re-entry with the disconnected request's context: %v, want the hold count up", got.err)
	}
	if got.innerCause != context.Canceled {
		t.Errorf("re-entered level's cause = %v, want the caller's context.Canceled", got.innerCause)
	}
	if !got.heldAfter {
		t.Error("the route's hold ended with the inner unlock")
	}
}
