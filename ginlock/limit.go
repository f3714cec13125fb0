package ginlock

import (
	"context"
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// Limiter hands out the permits of counting semaphores, at most limit
// holders of a key at once across every process sharing the Redis:
// [*lock.Client] is one (see [lock.Client.Acquire]). Acquire waits for a
// permit, first come first served, until ctx ends or the wait set with
// [lock.WithMaxWait] passes; TryAcquire makes one attempt, and fails with
// an error matching [lock.ErrNotObtained] (a [*lock.NotObtainedError]
// telling when the soonest holder's lease ends) when limit requests hold
// key or others wait for it. Both return the permit's context, which
// [lock.Held] reports holding key, and the function that gives the permit
// back.
type Limiter interface {
	Acquire(ctx context.Context, key string, limit int, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error)
	TryAcquire(ctx context.Context, key string, limit int, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error)
}

// Limit returns gin middleware that lets at most limit requests with the
// same key, across all replicas sharing the Redis, run the rest of the
// handler chain at once:
//
//	r.POST("/reports", ginlock.Limit(locker, "reports:{header.X-Tenant}", 3), report)
//
// runs at most 3 report generations per tenant at a time. Each request
// holds one of the limit permits of its key while the chain runs, taken
// with limiter.TryAcquire (limiter.Acquire with [WithWait]). When limit
// requests hold the key, the request is answered at once with 429 Too
// Many Requests, a Retry-After header (the [WithRetryAfter] hint, 1 s by
// default, never later than the soonest end of a holder's lease) and an
// application/problem+json body; with [WithWait] it waits for a permit,
// first come first served across replicas, and gets the 429 if the wait
// ends first. [WithConflictStatus] replaces the 429.
//
// Everything else is as for [New], with a permit for the lock: key
// templates and escaping, 400 for a missing value, 503 with Retry-After
// when Redis does not answer within the acquisition bound (1 s by
// default), the permit held and renewed while the chain runs, also after
// the client went away, and given back when the chain returns or panics,
// the handler's context, [Key] and [FencingToken], the options, and what
// is passed to [gin.Context.Error] (a full key is not). A request that
// holds a permit of the key already (a Limit of the same key and limit on
// its route group) re-enters it instead of taking a second one.
//
// Every Limit of a key must pass the same limit, and no [New] or [Wrap]
// may use the key: while the key has holders, a request taking it with
// another limit, or as a lock, is answered 500 Internal Server Error (the
// lock is misconfigured) and its error, wrapping [lock.ErrInvalid], is
// passed to [gin.Context.Error]. Give a Limit's template a prefix of its
// own.
//
// Limit panics, as New does, when limiter is nil or the template or an
// option is invalid, and when limit is less than 1.
func Limit(limiter Limiter, key string, limit int, opts ...Option) gin.HandlerFunc {
	if limit < 1 {
		panic(fmt.Errorf("ginlock: Limit(%q, %d): the limit must be at least 1", key, limit))
	}
	m := mustMiddleware("Limit", key, opts, httpkit.PermitKind(limiter, limit))
	return func(c *gin.Context) { m.serve(c, nil) }
}
