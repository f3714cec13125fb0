package httplock_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// The lock is held, and renewed, for as long as the handler runs, also
// after the client went away: the handler's context says so with
// context.Canceled, a retry meanwhile gets 409, and the key is free once
// the handler returns. Served by a real http.Server over loopback.
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
	mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}", httplock.WithLockOptions(lock.WithLease(lease))),
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("retry") != "" {
				ok(w, r)
				return
			}
			defer close(done)
			ctx := r.Context()
			close(entered)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			// The payment is finished deliberately, past the lease.
			<-retried
			time.Sleep(2 * lease)
			heldAfter <- lock.Held(ctx, httplock.Key(r))
		})
	hs := httptest.NewServer(mux)
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
	locktest.Eventually(t, time.Second, "the key free after the handler returned", func() bool {
		return !locktest.Held(t, rdb, redisKey("orders:42"))
	})
}

var errBoom = errors.New("boom")

// A handler that panics releases the lock, and the panic goes on: to the
// caller of ServeHTTP, and to the http.Server, which drops the connection.
func TestPanicReleases(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locker := locktest.NewClient(t, rdb)
	var ctx context.Context
	mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}"), func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("boom") == "" {
			ok(w, r)
			return
		}
		ctx = r.Context()
		panic(errBoom)
	})

	func() {
		defer func() {
			if p := recover(); p != errBoom {
				t.Fatalf("recovered %v, want the handler's panic", p)
			}
		}()
		do(mux, http.MethodPost, "/orders/42/pay?boom=1")
		t.Fatal("ServeHTTP returned, want the handler's panic")
	}()
	if !errors.Is(context.Cause(ctx), lock.ErrNotHeld) {
		t.Errorf("handler's context cause after the panic = %v, want one matching lock.ErrNotHeld", context.Cause(ctx))
	}
	released(t)
	if locktest.Held(t, rdb, redisKey("orders:42")) {
		t.Fatal("key still held after the handler panicked")
	}

	hs := httptest.NewUnstartedServer(mux)
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // the server logs the panic
	hs.Start()
	defer hs.Close()
	if resp, err := hs.Client().Post(hs.URL+"/orders/43/pay?boom=1", "", nil); err == nil {
		resp.Body.Close()
		t.Fatalf("status %d, want the connection dropped by the server's recovery", resp.StatusCode)
	}
	released(t)
	resp, err := hs.Client().Post(hs.URL+"/orders/43/pay", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after the panic: status %d, want 200", resp.StatusCode)
	}
}

// A lease lost while the handler runs (its key deleted in Redis) ends the
// handler's context with cause lock.ErrLost, and FencingToken then says
// the request holds no lock.
func TestLostLeaseEndsHandlerContext(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locker := locktest.NewClient(t, rdb)
	entered, lost := make(chan struct{}), make(chan struct{})
	var cause error
	var tokenAfter bool
	mux := route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}",
		httplock.WithLockOptions(lock.WithLease(600*time.Millisecond))), func(w http.ResponseWriter, r *http.Request) {
		defer close(lost)
		close(entered)
		if locktest.ClosedWithin(r.Context().Done(), locktest.Bound(2*time.Second)) {
			cause = context.Cause(r.Context())
		}
		_, tokenAfter = httplock.FencingToken(r)
		ok(w, r)
	})
	answered := make(chan int)
	go func() { answered <- do(mux, http.MethodPost, "/orders/42/pay").Code }()
	<-entered
	if err := rdb.Del(context.Background(), redisKey("orders:42")).Err(); err != nil {
		t.Fatal(err)
	}
	<-lost
	<-answered
	if !errors.Is(cause, lock.ErrLost) || tokenAfter {
		t.Fatalf("handler's context cause %v, FencingToken ok %v; want lock.ErrLost, false", cause, tokenAfter)
	}
}
