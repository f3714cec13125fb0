package httplock_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestRunsHandlerHoldingLock(t *testing.T) {
	rdb, locker := newLocker(t)
	type seen struct {
		held, inRedis, tokenOK bool
		key                    string
		token                  uint64
	}
	var s seen
	mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}"), func(w http.ResponseWriter, r *http.Request) {
		s.held = lock.Held(r.Context(), "orders:42")
		s.inRedis = locktest.Held(t, rdb, redisKey("orders:42"))
		s.key = httplock.Key(r)
		s.token, s.tokenOK = httplock.FencingToken(r)
		ok(w, r)
	})
	if w := do(mux, http.MethodPost, "/orders/42/pay"); w.Code != http.StatusOK || w.Body.String() != "done" {
		t.Fatalf("status %d body %q, want 200 done", w.Code, w.Body)
	}
	if !s.held || !s.inRedis || s.key != "orders:42" || !s.tokenOK || s.token == 0 {
		t.Fatalf("handler saw %+v; want the lock held, in Redis, key orders:42 and a fencing token", s)
	}
	released(t)
	if locktest.Held(t, rdb, redisKey("orders:42")) {
		t.Fatal("lock key still in Redis after the request")
	}
	// Outside a handler the middleware runs: no key, no token.
	r := httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil)
	if k, _ := httplock.FencingToken(r); httplock.Key(r) != "" || k != 0 {
		t.Fatal("Key or FencingToken set on a request no middleware ran")
	}
}

// A held key is answered 409 with a problem body and a Retry-After never
// later than the holder's remaining lease, and the handler does not run.
func TestConflict(t *testing.T) {
	_, locker := newLocker(t)
	hold(t, locker, "orders:42", lock.WithLease(9500*time.Millisecond))
	ran := false
	run := func(w http.ResponseWriter, r *http.Request) { ran = true }
	for _, tt := range []struct {
		name string
		opts []httplock.Option
		want string
	}{
		{"default hint", nil, "1"},
		{"hint past the lease", []httplock.Option{httplock.WithRetryAfter(time.Minute)}, "9"},
		{"hint rounded up", []httplock.Option{httplock.WithRetryAfter(2100 * time.Millisecond)}, "3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}", tt.opts...), run)
			w := do(mux, http.MethodPost, "/orders/42/pay")
			locktest.CheckProblem(t, w, http.StatusConflict)
			if got := w.Header().Get("Retry-After"); got != tt.want {
				t.Errorf("Retry-After %q, want %q", got, tt.want)
			}
			if ran {
				t.Fatal("the handler ran while the key was held")
			}
		})
	}
}

func TestConflictStatusAndFailureHandler(t *testing.T) {
	_, locker := newLocker(t)
	hold(t, locker, "orders:42")
	mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}", httplock.WithConflictStatus(http.StatusLocked)), ok)
	locktest.CheckProblem(t, do(mux, http.MethodPost, "/orders/42/pay"), http.StatusLocked)

	var got error
	mux = route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}",
		httplock.WithFailureHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			got = err
			w.WriteHeader(http.StatusTeapot)
		})), ok)
	if w := do(mux, http.MethodPost, "/orders/42/pay"); w.Code != http.StatusTeapot {
		t.Fatalf("status %d, want the failure handler's 418", w.Code)
	}
	var nob *lock.NotObtainedError
	if !errors.Is(got, lock.ErrNotObtained) || !errors.As(got, &nob) || nob.RemainingLease <= 0 {
		t.Fatalf("failure handler got %v, want a *lock.NotObtainedError with the holder's lease", got)
	}
}

// WithWait makes a request wait for a held key instead of a 409.
func TestWait(t *testing.T) {
	_, locker := newLocker(t)
	unlock := hold(t, locker, "orders:42")
	mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}", httplock.WithWait(5*time.Second)), ok)
	done := make(chan int)
	go func() { done <- do(mux, http.MethodPost, "/orders/42/pay").Code }()
	select {
	case code := <-done:
		t.Fatalf("answered %d while the key was held, want a wait", code)
	case <-time.After(100 * time.Millisecond):
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("status %d after the holder released, want 200", code)
	}
}

func TestOptionsReachLock(t *testing.T) {
	rdb, locker := newLocker(t)
	var ttl time.Duration
	mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}",
		httplock.WithLockOptions(lock.WithLease(7*time.Second))), func(w http.ResponseWriter, r *http.Request) {
		ttl = rdb.PTTL(r.Context(), redisKey("orders:42")).Val()
		ok(w, r)
	})
	if w := do(mux, http.MethodPost, "/orders/42/pay"); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if ttl <= 6*time.Second || ttl > 7*time.Second {
		t.Fatalf("lease in Redis %v, want WithLease's 7 s", ttl)
	}
}

// The lock is held until the handler returns: a second request while
// the first runs gets 409, one after it 200.
func TestHeldWhileHandlerRuns(t *testing.T) {
	_, locker := newLocker(t)
	entered, finish := make(chan struct{}), make(chan struct{})
	mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}"), func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("slow") != "" {
			close(entered)
			<-finish
		}
		ok(w, r)
	})
	first := make(chan int)
	go func() { first <- do(mux, http.MethodPost, "/orders/42/pay?slow=1").Code }()
	<-entered
	locktest.CheckProblem(t, do(mux, http.MethodPost, "/orders/42/pay"), http.StatusConflict)
	if w := do(mux, http.MethodPost, "/orders/43/pay"); w.Code != http.StatusOK {
		t.Fatalf("another order: status %d, want 200", w.Code)
	}
	close(finish)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("first: status %d", code)
	}
	// The answer waited for the release (on a Redis that answers).
	if w := do(mux, http.MethodPost, "/orders/42/pay"); w.Code != http.StatusOK {
		t.Fatalf("after the first: status %d, want 200", w.Code)
	}
}

// The handler's context ends, with a cause matching lock.ErrNotHeld,
// when the handler returns.
func TestHandlerContextEndsWhenHandlerReturns(t *testing.T) {
	_, locker := newLocker(t)
	var ctx context.Context
	mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}"), func(w http.ResponseWriter, r *http.Request) {
		ctx = r.Context()
		if ctx.Err() != nil {
			t.Error("handler's context done while it runs")
		}
		ok(w, r)
	})
	do(mux, http.MethodPost, "/orders/42/pay")
	if !errors.Is(context.Cause(ctx), lock.ErrNotHeld) || lock.Held(ctx, "orders:42") {
		t.Fatalf("after the handler: cause %v, Held %v; want ErrNotHeld, false", context.Cause(ctx), lock.Held(ctx, "orders:42"))
	}
}

// Limit lets limit requests of a key run at once, and answers the next
// 429; RLock lets readers run together, never with a writer.
func TestLimitAndRLock(t *testing.T) {
	_, locker := newLocker(t)
	const limit = 2
	entered, finish := make(chan struct{}, limit), make(chan struct{})
	slow := func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-finish
		ok(w, r)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /reports/{tenant}", httplock.Limit(locker, "reports:{tenant}", limit)(http.HandlerFunc(slow)))
	mux.Handle("GET /config/{id}", httplock.RLock(locker, "config:{id}")(http.HandlerFunc(slow)))
	mux.Handle("PUT /config/{id}", httplock.New(locker, "config:{id}")(http.HandlerFunc(ok)))
	codes := make(chan int, 2*limit)
	for i := range 2 * limit {
		target := "/reports/acme"
		method := http.MethodPost
		if i >= limit {
			method, target = http.MethodGet, "/config/"+strconv.Itoa(7)
		}
		go func() { codes <- do(mux, method, target).Code }()
	}
	for range 2 * limit {
		<-entered
	}
	w := do(mux, http.MethodPost, "/reports/acme")
	locktest.CheckProblem(t, w, http.StatusTooManyRequests)
	locktest.CheckProblem(t, do(mux, http.MethodPut, "/config/7"), http.StatusConflict)
	close(finish)
	for range 2 * limit {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("status %d, want 200", code)
		}
	}
	released(t)
	if w := do(mux, http.MethodPut, "/config/7"); w.Code != http.StatusOK {
		t.Fatalf("writer after the readers: status %d", w.Code)
	}
}
