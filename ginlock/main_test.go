package ginlock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/lock"

	"github.com/lockkit/lockkit/internal/redistest"
)

func TestMain(m *testing.M) {
	redistest.QuietLogs()
	gin.SetMode(gin.TestMode)
	goleak.VerifyTestMain(m)
}

// released waits until the middleware's releases, which run in the
// background after the chain, have ended: one round trip on a Redis that
// answers.
func released(t *testing.T) {
	t.Helper()
	waitFor(t, 2*time.Second, "the background releases to end", func() bool { return ginlock.ReleasesInFlight() == 0 })
}

// redisKey is the Redis key the lock Client uses for a lock key without
// braces or '%' (see package lock).
func redisKey(key string) string { return "lockkit:{" + key + "}" }

// do serves one request on r and returns the response.
func do(r http.Handler, req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}

// post serves POST target on r.
func post(r http.Handler, target string) *httptest.ResponseRecorder {
	return do(r, httptest.NewRequest(http.MethodPost, target, nil))
}

// errorsOf returns a middleware that stores the errors the rest of the
// chain passed to c.Error.
func errorsOf(dst *[]error) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		for _, e := range c.Errors {
			*dst = append(*dst, e.Err)
		}
	}
}

// keyRecorder is a lock.Locker that grants every lock and records keys.
type keyRecorder struct {
	keys []string
	err  error // returned instead of granting, when set
}

func (k *keyRecorder) Lock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	return k.TryLock(ctx, key, opts...)
}

func (k *keyRecorder) TryLock(ctx context.Context, key string, _ ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	k.keys = append(k.keys, key)
	if k.err != nil {
		return nil, nil, k.err
	}
	return ctx, func() error { return nil }, nil
}
