package ginlock_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestReleaseOnPanic(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var recovered any
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, v any) {
		recovered = v
		if lock.Held(c.Request.Context(), "orders:42") {
			t.Error("lock still held when the panic reached recovery")
		}
		c.AbortWithStatus(http.StatusInternalServerError)
	}))
	panics := true
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		if panics {
			panic("card declined")
		}
		c.Status(http.StatusOK)
	})

	if w := post(r, "/orders/42/pay"); w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500 from recovery", w.Code)
	}
	if recovered != "card declined" {
		t.Fatalf("recovery got %v, want the handler's panic", recovered)
	}
	panics = false
	if w := post(r, "/orders/42/pay"); w.Code != http.StatusOK {
		t.Fatalf("next request: status %d, want 200", w.Code)
	}
	released(t)
	if locktest.Held(t, rdb, redisKey("orders:42")) {
		t.Fatal("lock key still in Redis after the requests")
	}
}

// TestReleaseAfterDisconnect serves over HTTP; the client goes away while
// the handler runs, which cancels the request's context.
func TestReleaseAfterDisconnect(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	entered := make(chan struct{})
	finished := make(chan []string, 1)
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		finished <- c.Errors.Errors() // after the release
	})
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		close(entered)
		select {
		case <-c.Request.Context().Done():
		case <-time.After(10 * time.Second):
			t.Error("request context not cancelled after the client went away")
		}
	})
	srv := httptest.NewServer(r)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders/42/pay", nil)
	go func() {
		<-entered
		cancel()
	}()
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded, want it cancelled")
	}
	select {
	case errs := <-finished:
		if len(errs) != 0 {
			t.Fatalf("c.Errors = %v, want none (release must not use the cancelled context)", errs)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("handler chain did not finish")
	}
	released(t)
	if locktest.Held(t, rdb, redisKey("orders:42")) {
		t.Fatal("lock key still in Redis after the client went away")
	}
}

func TestLostLockCancelsHandler(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var errs []error
	var cause error
	r := payRoute(locker, &errs, func(c *gin.Context) {
		ctx := c.Request.Context()
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-time.After(10 * time.Second):
		}
		c.Status(http.StatusAccepted)
	}, ginlock.WithLockOptions(lock.WithFixedLease(100*time.Millisecond)))

	if w := post(r, "/orders/42/pay"); w.Code != http.StatusAccepted {
		t.Fatalf("status %d", w.Code)
	}
	if !errors.Is(cause, lock.ErrLost) {
		t.Fatalf("handler's context ended with cause %v, want ErrLost", cause)
	}
	if len(errs) != 1 || !errors.Is(errs[0], lock.ErrLost) {
		t.Fatalf("c.Errors = %v, want the release's ErrLost", errs)
	}
}

// TestNestedSameKey puts ginlock on a group and on one of its routes with
// the same key: the route's middleware re-enters the group's hold.
func TestNestedSameKey(t *testing.T) {
	mr, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var count string
	var errs []error
	r := gin.New()
	r.Use(errorsOf(&errs))
	orders := r.Group("/orders/:id", ginlock.New(locker, "orders:{id}"))
	orders.POST("/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		count = mr.HGet(redisKey("orders:42"), "n") // the hold count
		c.Status(http.StatusOK)
	})
	if w := post(r, "/orders/42/pay"); w.Code != http.StatusOK {
		t.Fatalf("status %d; errors %v", w.Code, errs)
	}
	if count != "2" {
		t.Fatalf("hold count in the handler = %q, want 2", count)
	}
	released(t)
	if held := locktest.Held(t, rdb, redisKey("orders:42")); held || len(errs) != 0 {
		t.Fatalf("after the request: key held %v, errors %v", held, errs)
	}
}

// TestHandlerReenters locks the route's key again from the handler, as
// code called by it might: it does not wait.
func TestHandlerReenters(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var errs []error
	r := payRoute(locker, &errs, func(c *gin.Context) {
		_, unlock, err := locker.TryLock(c.Request.Context(), "orders:42")
		if err != nil {
			t.Errorf("re-entry from the handler: %v", err)
			return
		}
		if err := unlock(); err != nil {
			t.Error(err)
		}
		c.Status(http.StatusOK)
	})
	if w := post(r, "/orders/42/pay"); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
}

// After the chain, an outer middleware sees the request's own context
// again (not cancelled, the lock not held) with the values an inner
// middleware attached, and context.Cause agrees with Err.
func TestInnerRequestValuesSurvive(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	type traceKey struct{}
	var seen any
	var held bool
	var err, cause error
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		ctx := c.Request.Context()
		seen, held, err, cause = ctx.Value(traceKey{}), lock.Held(ctx, "orders:42"), ctx.Err(), context.Cause(ctx)
	})
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		ctx, cancel := context.WithCancel(context.WithValue(c.Request.Context(), traceKey{}, "abc"))
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
	}, func(*gin.Context) {})
	if w := post(r, "/orders/42/pay"); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if seen != "abc" {
		t.Errorf("outer middleware saw value %v, want the inner chain's abc", seen)
	}
	if held || err != nil || cause != nil {
		t.Errorf("outer middleware saw Held %v, Err %v, Cause %v; want false, nil, nil", held, err, cause)
	}
}

// A streaming handler stops on a lost lock when its step checks the
// request's context: c.Stream by itself stops only on a disconnect.
func TestStreamStopsOnLostLock(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	cause := make(chan error, 1)
	r := gin.New()
	r.GET("/orders/:id/events", ginlock.New(locker, "orders:{id}",
		ginlock.WithLockOptions(lock.WithFixedLease(200*time.Millisecond))), func(c *gin.Context) {
		ctx := c.Request.Context()
		c.Stream(func(w io.Writer) bool {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(20 * time.Millisecond):
				c.SSEvent("progress", "working")
				return true
			}
		})
		cause <- context.Cause(ctx)
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	start := time.Now()
	resp, err := srv.Client().Get(srv.URL + "/orders/42/events")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body) // until the handler ends the stream
	resp.Body.Close()
	if got := <-cause; !errors.Is(got, lock.ErrLost) {
		t.Fatalf("stream ended with cause %v, want ErrLost", got)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("stream ran %v past a 200 ms lease", took)
	}
	if len(body) == 0 {
		t.Error("no events streamed")
	}
}
