package httplock_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Behind http.TimeoutHandler, the middleware inside it holds the lock
// while the handler runs after the timeout answered: a second request
// meanwhile is turned away, and runs of one key never overlap.
func TestInsideTimeoutHandlerHoldsPastTimeout(t *testing.T) {
	rdb, locker := newLocker(t)
	var running, overlaps atomic.Int32
	finished, leave := make(chan struct{}, 2), make(chan struct{})
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { finished <- struct{}{} }()
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		<-r.Context().Done() // the timeout: the handler goes on, detached
		<-leave
	})
	mux := http.NewServeMux()
	mux.Handle("POST /o/{id}", http.TimeoutHandler(httplock.New(locker, "o:{id}")(pay), 50*time.Millisecond, "timeout"))
	if w := do(mux, http.MethodPost, "/o/1"); w.Code != http.StatusServiceUnavailable || w.Body.String() != "timeout" {
		t.Fatalf("first: %d %q, want the timeout's 503", w.Code, w.Body)
	}
	locktest.CheckProblem(t, do(mux, http.MethodPost, "/o/1"), http.StatusConflict)
	close(leave)
	<-finished
	released(t)
	if locktest.Held(t, rdb, redisKey("o:1")) || overlaps.Load() != 0 {
		t.Fatalf("after the handler: held %v, overlaps %d; want free, 0", locktest.Held(t, rdb, redisKey("o:1")), overlaps.Load())
	}
}

// Two middlewares of different keys, nested: the handler holds both, Key
// is the inner one's, and both are free after it.
func TestNestedDifferentKeys(t *testing.T) {
	rdb, locker := newLocker(t)
	var key string
	var both bool
	h := httplock.New(locker, "tenant:{header.X-T}")(httplock.New(locker, "order:{id}")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key = httplock.Key(r)
		both = lock.Held(r.Context(), "tenant:acme") && lock.Held(r.Context(), "order:1")
	})))
	mux := http.NewServeMux()
	mux.Handle("POST /o/{id}", h)
	r := httptest.NewRequest(http.MethodPost, "/o/1", nil)
	r.Header.Set("X-T", "acme")
	mux.ServeHTTP(httptest.NewRecorder(), r)
	released(t)
	if key != "order:1" || !both {
		t.Fatalf("Key %q, both held %v; want order:1, true", key, both)
	}
	if locktest.Held(t, rdb, redisKey("tenant:acme")) || locktest.Held(t, rdb, redisKey("order:1")) {
		t.Fatal("a key held after the handler")
	}
}

// An outer middleware's r.WithContext reaches the handler: its values and
// its cancellation (the handler's context ends when it does).
func TestOuterWithContext(t *testing.T) {
	_, locker := newLocker(t)
	type ctxKey struct{}
	var value any
	var cause error
	inner := httplock.New(locker, "o:{id}")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		value = r.Context().Value(ctxKey{})
		<-r.Context().Done()
		cause = context.Cause(r.Context())
	}))
	errOuter := errors.New("outer middleware gave up")
	mux := http.NewServeMux()
	mux.Handle("POST /o/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(context.WithValue(r.Context(), ctxKey{}, "v"))
		time.AfterFunc(50*time.Millisecond, func() { cancel(errOuter) })
		inner.ServeHTTP(w, r.WithContext(ctx))
	}))
	do(mux, http.MethodPost, "/o/1")
	if value != "v" || !errors.Is(cause, errOuter) {
		t.Fatalf("value %v, cause %v; want v, the outer cause", value, cause)
	}
}

// Closing the lock Client while handlers run ends each handler's context
// with cause lock.ErrClosed; each is answered as it returns, and no
// release is left running.
func TestCloseWhileHandlersRun(t *testing.T) {
	_, locker := newLocker(t)
	const n = 3
	entered := make(chan struct{}, n)
	causes := make(chan error, n)
	mux := route("POST /o/{id}", httplock.New(locker, "o:{id}"), func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		if locktest.ClosedWithin(r.Context().Done(), locktest.Bound(2*time.Second)) {
			causes <- context.Cause(r.Context())
		} else {
			causes <- errors.New("handler's context not ended")
		}
		ok(w, r)
	})
	answered := make(chan int, n)
	for i := range n {
		go func() { answered <- do(mux, http.MethodPost, "/o/"+string(rune('1'+i))).Code }()
	}
	for range n {
		<-entered
	}
	if err := locker.Close(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-causes; !errors.Is(err, lock.ErrClosed) {
			t.Errorf("cause %v, want lock.ErrClosed", err)
		}
		if code := <-answered; code != http.StatusOK {
			t.Errorf("status %d, want the handler's 200", code)
		}
	}
	released(t)
}

// A request whose context ended before the middleware (the client went
// away) does not run the handler and leaves no hold: it gets the answer
// of a client that went away while waiting, the conflict answer, which
// no access log counts as a server failure.
func TestCancelledRequestLeavesNoHold(t *testing.T) {
	rdb, locker := newLocker(t)
	ran := false
	for _, k := range kinds {
		mux := route("POST /o/{id}", k.mw(locker, "o:{id}"), func(w http.ResponseWriter, r *http.Request) { ran = true })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/o/1", nil).WithContext(ctx))
		if w.Code != http.StatusConflict && w.Code != http.StatusTooManyRequests {
			t.Errorf("%s: status %d, want the conflict answer", k.name, w.Code)
		}
		released(t)
		if ran || locktest.Held(t, rdb, redisKey("o:1")) {
			t.Fatalf("%s: handler ran %v, key held %v; want neither", k.name, ran, locktest.Held(t, rdb, redisKey("o:1")))
		}
	}
}
