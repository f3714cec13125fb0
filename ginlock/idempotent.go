package ginlock

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/lock"
)

// Idempotent returns gin middleware serving the Idempotency-Key header
// (IETF draft-ietf-httpapi-idempotency-key-header) as
// [httplock.Idempotency] does: the first request with a key runs the rest
// of the chain under a lock and its answer is stored in rdb; a retry with
// the same key and request gets that answer replayed (header
// Idempotent-Replayed: true), with another request 422, and while the
// first still runs 409. The route of a request is [gin.Context.FullPath]
// (its path when no route matched). Use [IdempotencyScope] to keep the
// answers of different users apart.
//
// While the chain runs, c.Request's context is the lock context and
// c.Writer holds the answer back until the chain returns (see
// [httplock.Idempotency]); afterwards both are c's own again. When the
// middleware answers by itself (replay, 409, 422, 400, 413, 503) the
// chain is aborted.
//
// Idempotent panics where [httplock.NewIdempotency] returns an error.
func Idempotent(locker lock.Locker, rdb redis.UniversalClient, opts ...httplock.IdempotencyOption) gin.HandlerFunc {
	m, err := httplock.NewIdempotency(locker, rdb, opts...)
	if err != nil {
		panic(err)
	}
	return func(c *gin.Context) {
		req, gw := c.Request, c.Writer
		ran := false
		r := req.WithContext(context.WithValue(req.Context(), ginContextKey{}, c))
		m.Serve(gw, r, c.FullPath(), func(w2 http.ResponseWriter, r2 *http.Request) {
			ran = true
			c.Request = r2
			defer func() { c.Request, c.Writer = req, gw }()
			if w2 == http.ResponseWriter(gw) { // no key: nothing to hold back
				c.Next()
				return
			}
			aw := &answerWriter{w: w2, gw: gw, status: http.StatusOK, size: -1}
			c.Writer = aw
			c.Next()
			aw.WriteHeaderNow() // a status set without a body, as gin does
		})
		if !ran {
			c.Abort()
		}
	}
}

// IdempotencyScope is [httplock.WithScope] for gin: fn returns who a
// request's Idempotency-Key belongs to (the user, set by an earlier
// middleware with c.Set), so that users never share answers; "" gets the
// request 400 Bad Request. It works under [Idempotent] only.
func IdempotencyScope(fn func(c *gin.Context) string) httplock.IdempotencyOption {
	if fn == nil {
		return httplock.WithScope(nil) // reported by Idempotent
	}
	return httplock.WithScope(func(r *http.Request) string {
		c, _ := r.Context().Value(ginContextKey{}).(*gin.Context)
		if c == nil {
			return ""
		}
		return fn(c)
	})
}

// ginContextKey keys the gin.Context in the request Idempotent passes to
// the shared middleware.
type ginContextKey struct{}
