package ginlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// payRoute returns an engine serving POST /orders/:id/pay behind ginlock
// with "orders:{id}", recording c.Errors in errs and calling h.
func payRoute(locker lock.Locker, errs *[]error, h gin.HandlerFunc, opts ...ginlock.Option) *gin.Engine {
	r := gin.New()
	r.Use(errorsOf(errs))
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}", opts...), h)
	return r
}

func TestRunsHandlerHoldingLock(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var errs []error
	var restored bool
	r := gin.New()
	r.Use(errorsOf(&errs), func(c *gin.Context) {
		c.Next()
		restored = !lock.Held(c.Request.Context(), "orders:42") && c.Request.Context().Err() == nil
	})
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		if !lock.Held(c.Request.Context(), "orders:42") {
			t.Error("handler's c.Request context does not hold orders:42")
		}
		if !locktest.Held(t, rdb, redisKey("orders:42")) {
			t.Error("lock key missing in Redis while the handler runs")
		}
		c.String(http.StatusOK, "paid")
	})

	if w := post(r, "/orders/42/pay"); w.Code != http.StatusOK || w.Body.String() != "paid" {
		t.Fatalf("status %d body %q, want 200 paid", w.Code, w.Body)
	}
	released(t)
	if locktest.Held(t, rdb, redisKey("orders:42")) {
		t.Fatal("lock key still in Redis after the request")
	}
	if !restored {
		t.Fatal("c.Request after the middleware still carries the lock context")
	}
	if len(errs) != 0 {
		t.Fatalf("c.Errors = %v, want none", errs)
	}
}

func TestConflict(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	// Another replica holds order 42, with a lease much longer than the hint.
	_, unlock, err := locker.Lock(context.Background(), "orders:42", lock.WithLease(9500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	var errs []error
	ran := false
	r := payRoute(locker, &errs, func(*gin.Context) { ran = true })
	w := post(r, "/orders/42/pay")
	locktest.CheckProblem(t, w, http.StatusConflict)
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1 (the default hint, not the 9.5 s lease)", got)
	}
	if ran {
		t.Error("handler ran")
	}
	if len(errs) != 0 {
		t.Errorf("c.Errors = %v, want none: contention is not an error", errs)
	}
	if strings.Contains(w.Body.String(), "orders:42") {
		t.Errorf("answer %s carries the key", w.Body)
	}
	// Other orders are not affected.
	if w := post(r, "/orders/7/pay"); w.Code != http.StatusOK || !ran {
		t.Fatalf("other order: status %d, handler ran %v", w.Code, ran)
	}
}

// TestRetryAfter checks the hint of a conflict: WithRetryAfter's (1 s by
// default), never later than the holder's remaining lease.
func TestRetryAfter(t *testing.T) {
	tests := []struct {
		err  error
		hint time.Duration // 0: default
		want string
	}{
		{&lock.NotObtainedError{Key: "k", RemainingLease: 30 * time.Second}, 0, "1"},
		{&lock.NotObtainedError{Key: "k", RemainingLease: 30 * time.Second}, 5 * time.Second, "5"},
		{&lock.NotObtainedError{Key: "k", RemainingLease: 2500 * time.Millisecond}, 5 * time.Second, "2"}, // never past the lease
		{&lock.NotObtainedError{Key: "k", RemainingLease: time.Millisecond}, 5 * time.Second, "1"},
		{&lock.NotObtainedError{Key: "k"}, 5 * time.Second, "5"}, // lease unknown
		{lock.ErrNotObtained, 0, "1"},
		{errors.Join(&lock.NotObtainedError{Key: "k", RemainingLease: 4 * time.Second}, context.Canceled), 10 * time.Second, "4"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%v", tt.err, tt.hint), func(t *testing.T) {
			var errs []error
			var opts []ginlock.Option
			if tt.hint > 0 {
				opts = append(opts, ginlock.WithRetryAfter(tt.hint))
			}
			r := payRoute(&keyRecorder{err: tt.err}, &errs, func(*gin.Context) {}, opts...)
			w := post(r, "/orders/42/pay")
			locktest.CheckProblem(t, w, http.StatusConflict)
			if got := w.Header().Get("Retry-After"); got != tt.want {
				t.Fatalf("Retry-After = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConflictStatus(t *testing.T) {
	var errs []error
	r := payRoute(&keyRecorder{err: lock.ErrNotObtained}, &errs, func(*gin.Context) {},
		ginlock.WithConflictStatus(http.StatusLocked))
	w := post(r, "/orders/42/pay")
	locktest.CheckProblem(t, w, http.StatusLocked)
	if w.Header().Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
}

func TestFailureHandler(t *testing.T) {
	tests := []struct {
		name   string
		locker lock.Locker
		target string
		is     error
	}{
		{"held", &keyRecorder{err: &lock.NotObtainedError{Key: "orders:42"}}, "/orders/42/pay?attempt=1", lock.ErrNotObtained},
		{"missing", &keyRecorder{}, "/orders/42/pay", ginlock.ErrMissingValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got, errs []error
			ran := false
			r := gin.New()
			r.Use(errorsOf(&errs))
			r.POST("/orders/:id/pay", ginlock.New(tt.locker, "orders:{id}:{query.attempt}",
				ginlock.WithFailureHandler(func(c *gin.Context, err error) {
					got = append(got, err)
					c.JSON(http.StatusTooManyRequests, gin.H{"error": "busy"})
				})), func(*gin.Context) { ran = true })
			w := post(r, tt.target)
			if w.Code != http.StatusTooManyRequests || w.Body.String() != `{"error":"busy"}` {
				t.Fatalf("status %d body %q, want the failure handler's", w.Code, w.Body)
			}
			if len(got) != 1 || !errors.Is(got[0], tt.is) {
				t.Fatalf("failure handler got %v, want one error matching %v", got, tt.is)
			}
			if wantErrs := !errors.Is(tt.is, lock.ErrNotObtained); wantErrs != (len(errs) == 1) || len(errs) > 1 {
				t.Fatalf("c.Errors = %v; want the handler's error there unless the key is merely held", errs)
			}
			if ran {
				t.Fatal("handler ran")
			}
		})
	}
}

// TestRedisFailure checks that the handler does not run when the lock
// cannot be taken: 503 when Redis or the Client is unavailable (invalid
// lock options are refused by New: TestMisconfigurationIsNotTheClientsFault).
func TestRedisFailure(t *testing.T) {
	tests := []struct {
		name   string
		locker func(t *testing.T) lock.Locker
		opts   []ginlock.Option
		status int
		is     error
	}{
		{"redis down", func(t *testing.T) lock.Locker {
			mr, _ := locktest.NewRedis(t)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr, MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			mr.Close()
			return locktest.NewClient(t, rdb)
		}, nil, http.StatusServiceUnavailable, nil},
		{"client closed", func(t *testing.T) lock.Locker {
			_, rdb := locktest.NewRedis(t)
			c := locktest.NewClient(t, rdb)
			_ = c.Close()
			return c
		}, nil, http.StatusServiceUnavailable, lock.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs []error
			ran := false
			r := payRoute(tt.locker(t), &errs, func(*gin.Context) { ran = true }, tt.opts...)
			w := post(r, "/orders/42/pay")
			locktest.CheckProblem(t, w, tt.status)
			if ran {
				t.Error("handler ran")
			}
			if got, want := w.Header().Get("Retry-After"), tt.status == http.StatusServiceUnavailable; (got == "1") != want {
				t.Errorf("Retry-After = %q, want 1 only on 503", got)
			}
			if len(errs) != 1 || errors.Is(errs[0], lock.ErrNotObtained) || tt.is != nil && !errors.Is(errs[0], tt.is) {
				t.Errorf("c.Errors = %v, want one error matching %v, not ErrNotObtained", errs, tt.is)
			}
		})
	}
}

func TestLockOptionsPassThrough(t *testing.T) {
	mr, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var ttl time.Duration
	var errs []error
	r := payRoute(locker, &errs, func(c *gin.Context) { ttl = mr.TTL(redisKey("orders:42")) },
		ginlock.WithLockOptions(lock.WithLease(7*time.Second)))
	if w := post(r, "/orders/42/pay"); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if ttl > 7*time.Second || ttl < 6*time.Second {
		t.Fatalf("lease in Redis = %v, want 7s", ttl)
	}
}

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWait(t *testing.T) {
	mr, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	_, unlock, err := locker.Lock(context.Background(), "orders:42")
	if err != nil {
		t.Fatal(err)
	}

	var errs []error
	var released, ran time.Time
	r := payRoute(locker, &errs, func(*gin.Context) { ran = time.Now() }, ginlock.WithWait(10*time.Second))
	done := make(chan int)
	go func() { done <- post(r, "/orders/42/pay").Code }()
	// A waiter subscribes to the release channel after a failed attempt.
	channels := redisKey("orders:42") + ":released:*" // one per Client waiting
	waitFor(t, 5*time.Second, "request waiting", func() bool { return len(mr.PubSubChannels(channels)) == 1 })
	released = time.Now()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("status %d, want 200 after the holder released; errors %v", code, errs)
	}
	if ran.Before(released) {
		t.Fatal("handler ran before the holder released")
	}
}

func TestWaitLimit(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	_, unlock, err := locker.Lock(context.Background(), "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	var errs []error
	const wait = 200 * time.Millisecond
	r := payRoute(locker, &errs, func(*gin.Context) { t.Error("handler ran") }, ginlock.WithWait(wait))
	start := time.Now()
	w := post(r, "/orders/42/pay")
	elapsed := time.Since(start)
	locktest.CheckProblem(t, w, http.StatusConflict)
	if elapsed < wait || elapsed > wait+5*time.Second {
		t.Fatalf("answered after %v, want about %v", elapsed, wait)
	}
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After = %q, want 1 (the default hint)", got)
	}
}

// TestHugeValue sends a header far longer than lock.MaxKeyLen: the key
// stays small and the request is served.
func TestHugeValue(t *testing.T) {
	mr, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var keys []string
	r := gin.New()
	r.POST("/upload", ginlock.New(locker, "uploads:{header.X-Upload-Id}"), func(c *gin.Context) {
		keys = mr.Keys()
		c.Status(http.StatusOK)
	})
	req := httptest.NewRequest(http.MethodPost, "/upload", nil)
	req.Header.Set("X-Upload-Id", strings.Repeat("u", 4*lock.MaxKeyLen))
	if w := do(r, req); w.Code != http.StatusOK {
		t.Fatalf("status %d, body %s", w.Code, w.Body)
	}
	for _, k := range keys {
		if len(k) > 200 {
			t.Fatalf("Redis key of %d bytes: %.80q...", len(k), k)
		}
	}
	if len(keys) == 0 {
		t.Fatal("no Redis key while the handler ran")
	}
}
