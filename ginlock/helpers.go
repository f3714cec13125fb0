package ginlock

import (
	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/lock"
)

// keyName is where the middleware keeps the request's lock key in the
// gin.Context, for Key and FencingToken.
const keyName = "github.com/lockkit/lockkit/ginlock.key"

// Key returns the lock key the middleware took for this request: its key
// template filled with the request's escaped values. It returns "" outside
// a handler chain the middleware runs. Under two ginlock middlewares, it is
// the inner one's key. Use it instead of rebuilding the key: escaping
// changes values such as "a:b".
func Key(c *gin.Context) string {
	return c.GetString(keyName)
}

// FencingToken returns the fencing token of the request's lock (see
// [lock.FencingToken]), and false outside a handler chain the middleware
// runs or once the hold has ended (lost).
//
// It reads c.Request's context, so it works on any gin engine. Pass
// c.Request.Context() (not c) to code that takes locks: gin's default
// engine does not look up context values through c (ContextWithFallback
// is off), so a Lock of the same key with c would not see that the
// request holds it and would wait for its own request.
func FencingToken(c *gin.Context) (uint64, bool) {
	key := Key(c)
	if key == "" {
		return 0, false
	}
	return lock.FencingToken(c.Request.Context(), key)
}
