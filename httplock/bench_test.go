package httplock_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// BenchmarkMiddleware serves POST /orders/42/pay on a ServeMux without
// httplock, with httplock on a Locker that makes no Redis call (the
// middleware's own cost: key rendering, context, release), and with
// httplock on a lock.Client of a real redis-server on loopback (one
// TryLock and one release round trip).
func BenchmarkMiddleware(b *testing.B) {
	srv := redistest.Start(b)
	for _, bb := range []struct {
		name   string
		locker lock.Locker
	}{
		{"without", nil},
		{"nop-locker", &keyRecorder{}},
		{"redis", locktest.NewClient(b, srv.Client(b))},
	} {
		b.Run(bb.name, func(b *testing.B) {
			mux := http.NewServeMux()
			var h http.Handler = http.HandlerFunc(ok)
			if bb.locker != nil {
				h = httplock.New(bb.locker, "orders:{id}")(h)
			}
			mux.Handle("POST /orders/{id}/pay", h)
			req := httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil)
			b.ReportAllocs()
			for b.Loop() {
				if rec, ok := bb.locker.(*keyRecorder); ok {
					rec.keys = rec.keys[:0]
				}
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
