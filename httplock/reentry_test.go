package httplock_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// An httplock middleware inside another of the same key re-enters its
// hold, as does a Lock of the key with the request's context; inside one
// of another key, Key is the inner one's and both are held.
func TestReentry(t *testing.T) {
	_, locker := newLocker(t)
	type seen struct {
		key              string
		heldOrder, heldT bool
		relockErr        error
	}
	var s seen
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.key = httplock.Key(r)
		s.heldOrder, s.heldT = lock.Held(r.Context(), "orders:42"), lock.Held(r.Context(), "tenants:acme")
		_, unlock, err := locker.TryLock(r.Context(), "orders:42")
		if s.relockErr = err; err == nil {
			_ = unlock()
		}
		ok(w, r)
	})
	group := httplock.New(locker, "orders:{id}")
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", group(httplock.New(locker, "orders:{id}")(h)))
	mux.Handle("POST /t/{tenant}/orders/{id}", group(httplock.New(locker, "tenants:{tenant}")(h)))

	if w := do(mux, http.MethodPost, "/orders/42/pay"); w.Code != http.StatusOK ||
		s.key != "orders:42" || !s.heldOrder || s.relockErr != nil {
		t.Fatalf("same key: status %d, saw %+v; want 200, orders:42 held and re-entered", w.Code, s)
	}
	if w := do(mux, http.MethodPost, "/t/acme/orders/42"); w.Code != http.StatusOK ||
		s.key != "tenants:acme" || !s.heldOrder || !s.heldT {
		t.Fatalf("other key: status %d, saw %+v; want 200, Key tenants:acme, both held", w.Code, s)
	}
}

// With a middleware that answers and lets the handler go on detached
// (http.TimeoutHandler) between two httplock middlewares of one key, the
// outer hold lasts until the inner handler has returned too.
func TestOuterHoldOutlivesDetachedHandler(t *testing.T) {
	rdb, locker := newLocker(t)
	entered, finish, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(finished)
		close(entered)
		<-finish
		if !lock.Held(r.Context(), "orders:42") {
			t.Error("the detached handler does not hold orders:42")
		}
	})
	mux := http.NewServeMux()
	mw := httplock.New(locker, "orders:{id}")
	mux.Handle("POST /orders/{id}/pay", mw(http.TimeoutHandler(mw(slow), 200*time.Millisecond, "timeout")))
	mux.Handle("POST /orders/{id}/refund", mw(http.HandlerFunc(ok)))

	if w := do(mux, http.MethodPost, "/orders/42/pay"); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want TimeoutHandler's 503", w.Code)
	}
	<-entered
	locktest.CheckProblem(t, do(mux, http.MethodPost, "/orders/42/refund"), http.StatusConflict)
	released(t)
	if !locktest.Held(t, rdb, redisKey("orders:42")) {
		t.Fatal("key free while the detached handler runs")
	}
	close(finish)
	<-finished
	locktest.Eventually(t, time.Second, "the key free once the detached handler returned", func() bool {
		return !locktest.Held(t, rdb, redisKey("orders:42"))
	})
	if w := do(mux, http.MethodPost, "/orders/42/refund"); w.Code != http.StatusOK {
		t.Fatalf("after the detached handler: status %d, want 200", w.Code)
	}
}
