package ginlock_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// BenchmarkMiddleware serves POST /orders/42/pay without ginlock, with
// ginlock on a Locker that makes no Redis call (the middleware's own
// cost: key rendering, context swap, release), and with ginlock on a
// lock.Client of a real redis-server on loopback (one TryLock and one
// release round trip).
func BenchmarkMiddleware(b *testing.B) {
	srv := redistest.Start(b)
	pay := func(c *gin.Context) { c.Status(http.StatusOK) }
	for _, bb := range []struct {
		name   string
		locker lock.Locker
	}{
		{"without", nil},
		{"nop-locker", &keyRecorder{}},
		{"redis", locktest.NewClient(b, srv.Client(b))},
	} {
		b.Run(bb.name, func(b *testing.B) {
			r := gin.New()
			if bb.locker == nil {
				r.POST("/orders/:id/pay", pay)
			} else {
				r.POST("/orders/:id/pay", ginlock.New(bb.locker, "orders:{id}"), pay)
			}
			req := httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil)
			b.ReportAllocs()
			for b.Loop() {
				if rec, ok := bb.locker.(*keyRecorder); ok {
					rec.keys = rec.keys[:0]
				}
				w := httptest.NewRecorder()
				r.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
