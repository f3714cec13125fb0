package ginlock_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/lock"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	goleak.VerifyTestMain(m)
}

// newMini returns a miniredis server and a go-redis client of it, both
// closed when the test ends.
func newMini(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return mr, rdb
}

// newLocker returns a lock Client closed when the test ends.
func newLocker(t testing.TB, rdb redis.UniversalClient) *lock.Client {
	t.Helper()
	c, err := lock.New(rdb)
	if err != nil {
		t.Fatalf("lock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
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

// problemBody is the RFC 9457 body the middleware writes.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// checkProblem fails the test unless w is a problem response with status.
func checkProblem(t *testing.T, w *httptest.ResponseRecorder, status int) problemBody {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	var p problemBody
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if p.Type != "about:blank" || p.Status != status || p.Title != http.StatusText(status) || p.Detail == "" {
		t.Fatalf("problem = %+v, want about:blank with status %d, its title and a detail", p, status)
	}
	return p
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

// commandCounter is a go-redis hook counting the commands a client sends.
type commandCounter struct{ n atomic.Int64 }

func countCommands(rdb *redis.Client) *commandCounter {
	cc := &commandCounter{}
	rdb.AddHook(cc)
	return cc
}

func (cc *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (cc *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		cc.n.Add(1)
		return next(ctx, cmd)
	}
}

func (cc *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		cc.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
