package ginlock_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// An httplock middleware in a gin route (gin.WrapH), behind a ginlock
// middleware of the same key and Client, re-enters its hold, as a second
// ginlock middleware would; httplock.Key tells the key.
func TestHTTPLockInsideGinLockReenters(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locker := locktest.NewClient(t, rdb)
	var key string
	var held bool
	h := httplock.New(locker, "orders:{query.id}")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, held = httplock.Key(r), lock.Held(r.Context(), "orders:42")
	}))
	g := gin.New()
	g.POST("/pay", ginlock.New(locker, "orders:{query.id}"), gin.WrapH(h))
	if w := post(g, "/pay?id=42"); w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", w.Code, w.Body)
	}
	released(t)
	if key != "orders:42" || !held || locktest.Held(t, rdb, redisKey("orders:42")) {
		t.Fatalf("key %q, held %v, held after %v; want orders:42, true, false", key, held, locktest.Held(t, rdb, redisKey("orders:42")))
	}
}
