package httplock_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// kinds are the middlewares of a lock Client, one per kind of hold.
var kinds = []struct {
	name string
	mw   func(c *lock.Client, key string, opts ...httplock.Option) func(http.Handler) http.Handler
}{
	{"New", func(c *lock.Client, key string, opts ...httplock.Option) func(http.Handler) http.Handler {
		return httplock.New(c, key, opts...)
	}},
	{"Limit", func(c *lock.Client, key string, opts ...httplock.Option) func(http.Handler) http.Handler {
		return httplock.Limit(c, key, 2, opts...)
	}},
	{"RLock", func(c *lock.Client, key string, opts ...httplock.Option) func(http.Handler) http.Handler {
		return httplock.RLock(c, key, opts...)
	}},
}

// Redis stopping mid-hold (SIGSTOP, or a connection gone half-open)
// ends the handler's context with cause lock.ErrLost once the lease can
// no longer be known to be held, whatever the kind of hold, and the
// handler that then returns is answered within 100 ms.
func TestFaultMidHoldEndsHandlerWithErrLost(t *testing.T) {
	const lease = 600 * time.Millisecond
	for _, f := range faults[:2] {
		for _, k := range kinds {
			t.Run(f.name+"/"+k.name, func(t *testing.T) {
				locktest.Timed(t)
				locker, start, end := f.setup(t)
				entered := make(chan struct{})
				var cause error
				var returned time.Time
				var lostAfter time.Duration
				mux := route("POST /o/{id}", k.mw(locker, "o:{id}", httplock.WithLockOptions(lock.WithLease(lease))),
					func(w http.ResponseWriter, r *http.Request) {
						defer func() { returned = time.Now() }()
						if r.URL.Query().Get("warm") != "" {
							return
						}
						close(entered)
						lostAfter = locktest.Eventually(t, locktest.Bound(3*lease), "the handler's context to end", func() bool {
							return r.Context().Err() != nil
						})
						cause = context.Cause(r.Context())
						ok(w, r)
					})
				if w := do(mux, http.MethodPost, "/o/1?warm=1"); w.Code != http.StatusOK {
					t.Fatalf("warm-up: %d", w.Code)
				}
				released(t)
				answered := make(chan int)
				go func() { answered <- do(mux, http.MethodPost, "/o/1").Code }()
				<-entered
				start()
				code := <-answered
				took := time.Since(returned)
				end()
				released(t)
				if !errors.Is(cause, lock.ErrLost) {
					t.Errorf("cause %v, want lock.ErrLost", cause)
				}
				if limit := lease + locktest.Bound(200*time.Millisecond); lostAfter > limit {
					t.Errorf("context ended %v after the fault, want within the lease and %v", lostAfter, limit)
				}
				if limit := 100*time.Millisecond + locktest.Bound(50*time.Millisecond); code != http.StatusOK || took > limit {
					t.Errorf("status %d %v after the handler returned; want 200 within %v", code, took, limit)
				}
			})
		}
	}
}

// A Redis that does not answer (SIGSTOP, half-open, closed Client) gets
// a request of any kind of hold a 503 within its acquisition bound +
// 100 ms, without running the handler.
func TestEveryKindAnswers503WithinBound(t *testing.T) {
	const bound = 300 * time.Millisecond
	for _, f := range faults {
		for _, k := range kinds {
			t.Run(f.name+"/"+k.name, func(t *testing.T) {
				locktest.Timed(t)
				locker, start, end := f.setup(t)
				ran := false
				mux := http.NewServeMux()
				for _, p := range []struct {
					pattern string
					opt     httplock.Option
				}{{"POST /try/{id}", httplock.WithAcquireTimeout(bound)}, {"POST /wait/{id}", httplock.WithWait(bound)}} {
					mux.Handle(p.pattern, k.mw(locker, "o:{id}", p.opt)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						ran = ran || r.URL.Query().Get("warm") == ""
					})))
				}
				for _, p := range []string{"/try/1?warm=1", "/wait/1?warm=1"} {
					if w := do(mux, http.MethodPost, p); w.Code != http.StatusOK {
						t.Fatalf("warm-up %s: status %d", p, w.Code)
					}
				}
				released(t)
				start()
				for _, p := range []string{"/try/1", "/wait/1"} {
					began := time.Now()
					w := do(mux, http.MethodPost, p)
					took := time.Since(began)
					locktest.CheckProblem(t, w, http.StatusServiceUnavailable)
					if limit := bound + locktest.Bound(100*time.Millisecond); took > limit {
						t.Errorf("%s: answered after %v, want within %v", p, took, limit)
					}
				}
				end()
				released(t)
				if ran {
					t.Fatal("the handler ran without the lock")
				}
			})
		}
	}
}

// A server Shutdown while a handler holds the key lets the handler finish
// under the lock, then the key is free; no goroutine is left (TestMain's
// goleak).
func TestShutdownWhileHolding(t *testing.T) {
	rdb, locker := newLocker(t)
	entered, leave := make(chan struct{}), make(chan struct{})
	var heldAtEnd bool
	mux := route("POST /o/{id}", httplock.New(locker, "o:{id}"), func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-leave
		heldAtEnd = lock.Held(r.Context(), httplock.Key(r))
		ok(w, r)
	})
	hs := httptest.NewServer(mux)
	answered := make(chan int)
	go func() {
		resp, err := hs.Client().Post(hs.URL+"/o/1", "", nil)
		if err != nil {
			t.Error(err)
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-entered
	shut := make(chan error)
	go func() { shut <- hs.Config.Shutdown(context.Background()) }()
	locktest.Eventually(t, locktest.Bound(time.Second), "Shutdown to close the listener", func() bool {
		c, err := net.Dial("tcp", hs.Listener.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if !locktest.Held(t, rdb, redisKey("o:1")) {
		t.Fatal("key not held during Shutdown")
	}
	close(leave)
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("status %d, want 200", code)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	hs.Close()
	released(t)
	if !heldAtEnd || locktest.Held(t, rdb, redisKey("o:1")) {
		t.Fatalf("held at the handler's end %v, after Shutdown %v; want true, false", heldAtEnd, locktest.Held(t, rdb, redisKey("o:1")))
	}
}
