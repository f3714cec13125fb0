package httplock

import (
	"net/http"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// Key returns the lock key the middleware took for this request: its key
// template filled with the request's escaped values. It returns "" for a
// request no httplock middleware runs the handler of. Under two httplock
// middlewares, it is the inner one's key. Use it instead of rebuilding
// the key: escaping changes values such as "a:b".
func Key(r *http.Request) string {
	return httpkit.HeldKey(r.Context())
}

// FencingToken returns the fencing token of the request's lock (see
// [lock.FencingToken]), and false for a request no httplock middleware
// runs the handler of or once the hold has ended (lost, or the handler
// returned).
func FencingToken(r *http.Request) (uint64, bool) {
	key := Key(r)
	if key == "" {
		return 0, false
	}
	return lock.FencingToken(r.Context(), key)
}
