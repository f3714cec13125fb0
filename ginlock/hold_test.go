package ginlock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// The lock is held, and renewed, for as long as the handler runs, also
// after the client went away: the handler's context says so with
// context.Canceled, a retry meanwhile gets 409, and the key is free once
// the handler returns.
func TestHoldOutlivesClientDisconnect(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locker := locktest.NewClient(t, rdb)
	const lease = 600 * time.Millisecond // renewed every 200 ms

	entered := make(chan struct{})
	cause := make(chan error, 1)
	heldAfter := make(chan bool, 1)
	retried := make(chan struct{})
	done := make(chan struct{})
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}", ginlock.WithLockOptions(lock.WithLease(lease))),
		func(c *gin.Context) {
			if c.Query("retry") != "" {
				c.Status(http.StatusOK)
				return
			}
			defer close(done)
			ctx := c.Request.Context()
			close(entered)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			// The payment is finished deliberately, past the lease.
			<-retried
			time.Sleep(2 * lease)
			heldAfter <- lock.Held(ctx, ginlock.Key(c))
		})
	hs := httptest.NewServer(r)
	defer hs.Close()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/orders/42/pay", nil)
	go func() {
		<-entered
		cancel() // the client goes away
	}()
	if resp, err := hs.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded, want it cancelled")
	}
	if got := <-cause; got != context.Canceled {
		t.Errorf("handler's context cause after disconnect = %v, want context.Canceled", got)
	}
	time.Sleep(2 * lease) // past the lease: still held only if renewed
	resp, err := hs.Client().Post(hs.URL+"/orders/42/pay?retry=1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	close(retried)
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("retry while the first handler runs: %d, want 409", resp.StatusCode)
	}
	if !<-heldAfter {
		t.Error("lock.Held false in the handler after the client went away")
	}
	<-done
	deadline := time.Now().Add(time.Second)
	for locktest.Held(t, rdb, redisKey("orders:42")) {
		if time.Now().After(deadline) {
			t.Fatal("key still held after the handler returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A stalled Redis gets a 503 with Retry-After in about a second (the
// default acquisition timeout), or within the wait set with WithWait.
func TestStalledRedisAnswersFast(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t)) // go-redis defaults: 3 s reads
	srv.Pause()
	t.Cleanup(srv.Resume)
	for _, tc := range []struct {
		name  string
		opts  []ginlock.Option
		limit time.Duration
	}{
		{"default", nil, ginlock.DefaultAcquireTimeout},
		{"WithAcquireTimeout", []ginlock.Option{ginlock.WithAcquireTimeout(300 * time.Millisecond)}, 300 * time.Millisecond},
		{"WithWait", []ginlock.Option{ginlock.WithWait(500 * time.Millisecond)}, 500 * time.Millisecond},
	} {
		var errs []error
		r := payRoute(locker, &errs, func(*gin.Context) { t.Error("handler ran") }, tc.opts...)
		start := time.Now()
		w := post(r, "/orders/42/pay")
		took := time.Since(start)
		t.Logf("%s: %d after %v (Retry-After %s)", tc.name, w.Code, took, w.Header().Get("Retry-After"))
		locktest.CheckProblem(t, w, http.StatusServiceUnavailable)
		if took > tc.limit+150*time.Millisecond {
			t.Errorf("%s: answered after %v, want within %v", tc.name, took, tc.limit)
		}
		if w.Header().Get("Retry-After") != "1" {
			t.Errorf("%s: Retry-After = %q, want 1", tc.name, w.Header().Get("Retry-After"))
		}
		if len(errs) != 1 || strings.Contains(errs[0].Error(), "orders:42") {
			t.Errorf("%s: c.Errors = %v, want one error naming the template, not the key", tc.name, errs)
		}
	}
}

// Key and FencingToken give the handler its route's lock, escaped values
// included, through c on gin's default engine.
func TestKeyAndFencingToken(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var key string
	var token uint64
	var ok bool
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		key = ginlock.Key(c)
		token, ok = ginlock.FencingToken(c)
	})
	if w := post(r, "/orders/a:b/pay"); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if key != "orders:a%3Ab" {
		t.Errorf("Key = %q, want the escaped key orders:a%%3Ab", key)
	}
	if !ok || token == 0 {
		t.Errorf("FencingToken = %d, %v; want a token", token, ok)
	}
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodGet, "/", nil)
	if k := ginlock.Key(c); k != "" {
		t.Errorf("Key outside the middleware = %q", k)
	}
	if _, ok := ginlock.FencingToken(c); ok {
		t.Error("FencingToken ok outside the middleware")
	}
}
