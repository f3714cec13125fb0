package httplock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// newLocker returns a go-redis client of a redis-server started for the
// test, and a lock Client on it; all end with the test, after the
// releases. (No embedded Redis: a test-only module that httplock's
// go.mod requires would join the module graph of every user.)
func newLocker(t *testing.T) (*redis.Client, *lock.Client) {
	t.Helper()
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	t.Cleanup(func() { released(t) })
	return rdb, locker
}

// released waits until the middleware's releases, which run in the
// background after the handler, have ended.
func released(t *testing.T) {
	t.Helper()
	locktest.Eventually(t, 3*time.Second, "the background releases to end", func() bool {
		return httplock.ReleasesInFlight() == 0
	})
}

// redisKey is the Redis key the lock Client uses for a lock key without
// braces or '%' (see package lock).
func redisKey(key string) string { return "lockkit:{" + key + "}" }

// route returns a ServeMux serving pattern with h behind mw.
func route(pattern string, mw func(http.Handler) http.Handler, h http.HandlerFunc) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(pattern, mw(h))
	return mux
}

// do serves method target on h and returns the response.
func do(h http.Handler, method, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
}

// ok answers 200 "done".
func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("done")) }

// hold takes key with locker for the test, as another replica would.
func hold(t *testing.T, locker lock.Locker, key string, opts ...lock.LockOption) lock.UnlockFunc {
	t.Helper()
	_, unlock := locktest.MustLock(t, locker, context.Background(), key, opts...)
	t.Cleanup(func() { _ = unlock() })
	return unlock
}
