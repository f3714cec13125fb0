package ginlock_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// A goroutine started with c.Copy() that outlives its handler, while gin
// reuses c for the next requests, is told the lock ended (a cause
// matching lock.ErrNotHeld, no fencing token), keeps its copy's key and
// values, and reads nothing the middleware writes to c afterwards (run
// with -race).
func TestCopyOutlivingHandlerToldAndUntouched(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	type seen struct {
		key, user string
		tokenOK   bool
		cause     error
	}
	res := make(chan seen, 1)
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set("user", c.Query("user")); c.Next() })
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		if c.Query("bg") == "" {
			c.Status(http.StatusOK)
			return
		}
		cp := c.Copy()
		go func() {
			ctx := cp.Request.Context()
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond) // gin serves other requests with c meanwhile
			_, ok := ginlock.FencingToken(cp)
			res <- seen{ginlock.Key(cp), cp.GetString("user"), ok, context.Cause(ctx)}
		}()
		c.Status(http.StatusOK)
	})
	hs := httptest.NewServer(r)
	defer hs.Close()
	resp, err := hs.Client().Post(hs.URL+"/orders/1/pay?bg=1&user=alice", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for range 20 { // reuse c
		resp, err := hs.Client().Post(hs.URL+"/orders/2/pay?user=bob", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	s := <-res
	if s.key != "orders:1" || s.user != "alice" {
		t.Errorf("copy saw key %q user %q, want orders:1 and alice", s.key, s.user)
	}
	if s.tokenOK {
		t.Error("copy still has a fencing token after the lock ended")
	}
	if !errors.Is(s.cause, lock.ErrNotHeld) {
		t.Errorf("copy's context cause %v, want one matching lock.ErrNotHeld", s.cause)
	}
	released(t)
}
