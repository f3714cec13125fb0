package httplock

import (
	"context"
	"fmt"
	"net/http"

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

// Limit returns net/http middleware that lets at most limit requests with
// the same key, across all replicas sharing the Redis, run the handler it
// wraps at once:
//
//	mux.Handle("POST /reports", httplock.Limit(locker, "reports:{header.X-Tenant}", 3)(report))
//
// runs at most 3 report generations per tenant at a time. Each request
// holds one of the limit permits of its key while the handler runs. When
// limit requests hold the key, the request is answered at once with 429
// Too Many Requests, Retry-After (never later than the soonest end of a
// holder's lease) and a problem body; with [WithWait] it waits for a
// permit, first come first served across replicas. Everything else is as
// for [New], with a permit for the lock, and as for ginlock.Limit (see
// [github.com/lockkit/lockkit/ginlock.Limit]): every Limit of a key must
// pass the same limit, and no New may use the key (such a request gets
// 500).
//
// Limit panics, as New does, when limiter is nil or the template or an
// option is invalid, and when limit is less than 1.
func Limit(limiter Limiter, key string, limit int, opts ...Option) func(http.Handler) http.Handler {
	if limit < 1 {
		panic(fmt.Errorf("httplock: Limit(%q, %d): the limit must be at least 1", key, limit))
	}
	return mustMiddleware("Limit", key, opts, httpkit.PermitKind(limiter, limit)).wrap
}
