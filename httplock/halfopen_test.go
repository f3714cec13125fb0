package httplock_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// proxied returns a lock Client whose connections to a redis-server
// started for the test go through a Proxy, a direct client of that
// server, and the Proxy.
func proxied(t *testing.T) (*lock.Client, *redis.Client, *locktest.Proxy) {
	t.Helper()
	srv := redistest.Start(t)
	proxy := locktest.StartProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: redistest.ContextTimeout()})
	t.Cleanup(func() { _ = rdb.Close() })
	return locktest.NewClient(t, rdb), srv.Client(t), proxy
}

// The connection of an acquisition goes half-open: the request, of any
// kind of hold, is answered within its bound + 100 ms, and its handler
// runs only while the key is held in Redis.
func TestHalfOpenAtAcquisition(t *testing.T) {
	const bound = 300 * time.Millisecond
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			locktest.Timed(t)
			locker, direct, proxy := proxied(t)
			ranWithout := false
			mux := route("POST /o/{id}", k.mw(locker, "o:{id}", httplock.WithAcquireTimeout(bound)), func(w http.ResponseWriter, r *http.Request) {
				if n, _ := direct.Exists(context.Background(), redisKey("o:"+r.PathValue("id"))).Result(); n == 0 {
					ranWithout = true
				}
				ok(w, r)
			})
			if w := do(mux, http.MethodPost, "/o/2"); w.Code != http.StatusOK {
				t.Fatalf("warm-up: %d", w.Code)
			}
			released(t)
			lost := proxy.LoseFirst("o:1")
			began := time.Now()
			w := do(mux, http.MethodPost, "/o/1")
			took := time.Since(began)
			if !closed(lost) {
				t.Fatal("no command naming the key went through the proxy")
			}
			if w.Code != http.StatusOK {
				locktest.CheckProblem(t, w, http.StatusServiceUnavailable)
			}
			if limit := bound + locktest.Bound(100*time.Millisecond); took > limit {
				t.Errorf("status %d after %v, want within %v", w.Code, took, limit)
			}
			if ranWithout {
				t.Error("the handler ran while Redis had no lock")
			}
			released(t)
			t.Logf("%d after %v", w.Code, took)
		})
	}
}

// The connection of a renewal goes half-open while the handler runs: the
// handler's context either ends with lock.ErrLost or, the renewal sent
// again on another connection, stays held, with the key in Redis past
// the lease; the answer follows the handler by 100 ms at most.
func TestHalfOpenMidHold(t *testing.T) {
	const lease = 600 * time.Millisecond
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			locktest.Timed(t)
			locker, direct, proxy := proxied(t)
			entered := make(chan struct{})
			var cause error
			var heldInRedis bool
			var returned time.Time
			mux := route("POST /o/{id}", k.mw(locker, "o:{id}", httplock.WithLockOptions(lock.WithLease(lease))),
				func(w http.ResponseWriter, r *http.Request) {
					defer func() { returned = time.Now() }()
					if r.URL.Query().Get("warm") != "" {
						return
					}
					close(entered)
					if locktest.ClosedWithin(r.Context().Done(), 3*lease) {
						cause = context.Cause(r.Context())
					}
					n, _ := direct.Exists(context.Background(), redisKey("o:1")).Result()
					heldInRedis = n == 1
					ok(w, r)
				})
			if w := do(mux, http.MethodPost, "/o/2?warm=1"); w.Code != http.StatusOK {
				t.Fatalf("warm-up: %d", w.Code)
			}
			released(t)
			answered := make(chan int)
			go func() { answered <- do(mux, http.MethodPost, "/o/1").Code }()
			<-entered
			lost := proxy.LoseFirst("o:1")
			code := <-answered
			took := time.Since(returned)
			if !closed(lost) {
				t.Fatal("no renewal went through the proxy while the handler ran")
			}
			if cause != nil && !errors.Is(cause, lock.ErrLost) || cause == nil && !heldInRedis {
				t.Errorf("cause %v, held in Redis %v; want lock.ErrLost, or no cause and held", cause, heldInRedis)
			}
			if limit := 100*time.Millisecond + locktest.Bound(50*time.Millisecond); code != http.StatusOK || took > limit {
				t.Errorf("status %d %v after the handler returned; want 200 within %v", code, took, limit)
			}
			released(t)
			t.Logf("cause %v, answered %v after the handler", cause, took)
		})
	}
}

// A waiter's pub/sub connection goes half-open after its first delivery
// (the subscription's confirmation): it still gets the key within its
// wait once the holder releases it, though the release's message never
// reaches it.
func TestHalfOpenPubSubWhileWaiting(t *testing.T) {
	locker, direct, proxy := proxied(t)
	other := locktest.NewClient(t, direct)
	wait := locktest.Bound(5 * time.Second)
	mux := route("POST /o/{id}", httplock.New(locker, "o:{id}", httplock.WithWait(wait)), ok)
	unlock := hold(t, other, "o:1")
	cut := proxy.CutPubSubAfterNextDelivery()
	answered := make(chan int)
	go func() { answered <- do(mux, http.MethodPost, "/o/1").Code }()
	locktest.Within(t, cut, locktest.Bound(2*time.Second), "the waiter's pub/sub connection to go half-open")
	began := time.Now()
	_ = unlock()
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("status %d %v after the release, want 200 within the wait (%v)", code, time.Since(began), wait)
	}
	t.Logf("served %v after the release", time.Since(began))
}

// closed reports whether ch is closed now.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
