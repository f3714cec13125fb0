package ginlock_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// idempotentRoute is POST /orders/:id/pay under Idempotent with opts,
// after a middleware that records the status c.Writer reports once the
// chain returned, and runs h, under gin's recovery.
func idempotentRoute(t *testing.T, rdb redis.UniversalClient, statuses *[]int, h gin.HandlerFunc, opts ...httplock.IdempotencyOption) *gin.Engine {
	t.Helper()
	locker := locktest.NewClient(t, rdb)
	t.Cleanup(func() { released(t) }) // before the Client closes
	r := gin.New()
	r.Use(gin.RecoveryWithWriter(io.Discard))
	r.POST("/orders/:id/pay", func(c *gin.Context) {
		req := c.Request
		c.Next()
		*statuses = append(*statuses, c.Writer.Status())
		if c.Request != req {
			t.Error("c.Request is not the request's own after the chain")
		}
	}, ginlock.Idempotent(locker, rdb, opts...), h)
	return r
}

func idemPay(key, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/orders/42/pay", strings.NewReader(body))
	if key != "" {
		r.Header.Set(httplock.IdempotencyKeyHeader, key)
	}
	return r
}

func TestIdempotentGinReplay(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	var runs atomic.Int64
	var statuses []int
	r := idempotentRoute(t, rdb, &statuses, func(c *gin.Context) {
		runs.Add(1)
		c.Header("Location", "/orders/"+c.Param("id"))
		c.JSON(http.StatusCreated, gin.H{"order": c.Param("id"), "run": runs.Load()})
	})
	first := do(r, idemPay(`"k"`, "amount=5"))
	if first.Code != http.StatusCreated || first.Header().Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("first answer %d %v", first.Code, first.Header())
	}
	again := do(r, idemPay(`"k"`, "amount=5"))
	if again.Code != first.Code || again.Body.String() != first.Body.String() ||
		again.Header().Get("Location") != "/orders/42" || again.Header().Get(httplock.ReplayedHeader) != "true" {
		t.Fatalf("replay %d %q %v, want the first answer %q", again.Code, again.Body, again.Header(), first.Body)
	}
	locktest.CheckProblem(t, do(r, idemPay(`"k"`, "amount=6")), http.StatusUnprocessableEntity)
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1: the chain was not aborted", runs.Load())
	}
	if got := statuses; len(got) != 3 || got[0] != 201 || got[1] != 201 || got[2] != 422 {
		t.Fatalf("c.Writer.Status() after the chain: %v, want 201 201 422", got)
	}
}

func TestIdempotentGinStatusOnly(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	var runs atomic.Int64
	var statuses []int
	r := idempotentRoute(t, rdb, &statuses, func(c *gin.Context) {
		runs.Add(1)
		c.Status(http.StatusAccepted)
	})
	for range 2 {
		if w := do(r, idemPay("k", "")); w.Code != http.StatusAccepted || w.Body.Len() != 0 {
			t.Fatalf("answer %d %q, want 202 without a body", w.Code, w.Body)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}

func TestIdempotentGinBypassAndRequired(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	var statuses []int
	var runs atomic.Int64
	h := func(c *gin.Context) { runs.Add(1); c.String(http.StatusOK, "paid") }
	if w := do(idempotentRoute(t, rdb, &statuses, h), idemPay("", "")); w.Code != 200 || w.Body.String() != "paid" {
		t.Fatalf("without a key: %d %q", w.Code, w.Body)
	}
	locktest.CheckProblem(t, do(idempotentRoute(t, rdb, &statuses, h, httplock.WithKeyRequired()), idemPay("", "")), http.StatusBadRequest)
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}

func TestIdempotentGinScope(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	var runs atomic.Int64
	locker := locktest.NewClient(t, rdb)
	t.Cleanup(func() { released(t) }) // before the Client closes
	r := gin.New()
	r.Use(gin.RecoveryWithWriter(io.Discard))
	r.POST("/orders/:id/pay", func(c *gin.Context) { c.Set("user", c.GetHeader("X-User")) },
		ginlock.Idempotent(locker, rdb, ginlock.IdempotencyScope(func(c *gin.Context) string { return c.GetString("user") })),
		func(c *gin.Context) { c.String(http.StatusOK, "run %d", runs.Add(1)) })
	var bodies []string
	for _, user := range []string{"alice", "bob", "alice"} {
		req := idemPay("k", "")
		req.Header.Set("X-User", user)
		bodies = append(bodies, do(r, req).Body.String())
	}
	if strings.Join(bodies, ",") != "run 1,run 2,run 1" {
		t.Fatalf("answers %q, want run 1, run 2, run 1 (alice's replayed)", bodies)
	}
	locktest.CheckProblem(t, do(r, idemPay("k", "")), http.StatusBadRequest)
}

func TestIdempotentGinConflict(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	var statuses []int
	started, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(proceed) }) }
	r := idempotentRoute(t, rdb, &statuses, func(c *gin.Context) {
		close(started)
		<-proceed
		c.String(http.StatusOK, "paid")
	})
	t.Cleanup(unblock)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(r, idemPay("k", "")) }()
	<-started
	w := do(r, idemPay("k", ""))
	locktest.CheckProblem(t, w, http.StatusConflict)
	if w.Header().Get("Retry-After") != "1" {
		t.Fatalf("Retry-After = %q, want 1", w.Header().Get("Retry-After"))
	}
	unblock()
	if first := <-done; first.Code != http.StatusOK || first.Body.String() != "paid" {
		t.Fatalf("the first request got %d %q", first.Code, first.Body)
	}
}

func TestIdempotentGinStreamNotStored(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	var statuses []int
	var runs atomic.Int64
	r := idempotentRoute(t, rdb, &statuses, func(c *gin.Context) {
		runs.Add(1)
		c.String(http.StatusOK, "part 1;")
		c.Writer.Flush()
		c.String(http.StatusOK, "part 2")
	})
	for range 2 {
		if w := do(r, idemPay("k", "")); w.Code != 200 || w.Body.String() != "part 1;part 2" || !w.Flushed {
			t.Fatalf("answer %d %q flushed=%v", w.Code, w.Body, w.Flushed)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("the handler ran %d times, want 2: a flushed answer was stored", runs.Load())
	}
}

func TestIdempotentGinInvalid(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	for name, f := range map[string]func(){
		"nil locker": func() { ginlock.Idempotent(nil, rdb) },
		"nil rdb":    func() { ginlock.Idempotent(locker, nil) },
		"nil scope":  func() { ginlock.Idempotent(locker, rdb, ginlock.IdempotencyScope(nil)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Idempotent did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestIdempotentGinPanic(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	var statuses []int
	var runs atomic.Int64
	r := idempotentRoute(t, rdb, &statuses, func(c *gin.Context) {
		if runs.Add(1) == 1 {
			c.String(http.StatusOK, "half")
			panic("boom")
		}
		c.String(http.StatusOK, "paid")
	})
	if w := do(r, idemPay("k", "")); w.Code != http.StatusInternalServerError || w.Body.Len() != 0 {
		t.Fatalf("a panicking handler: %d %q, want gin's recovery's 500 and nothing held back", w.Code, w.Body)
	}
	released(t)
	if w := do(r, idemPay("k", "")); w.Code != http.StatusOK || w.Body.String() != "paid" || runs.Load() != 2 {
		t.Fatalf("the retry: %d %q after %d runs, want the handler to run again", w.Code, w.Body, runs.Load())
	}
}
