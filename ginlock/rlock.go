package ginlock

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// RLocker takes keys shared, as the read side of a read-write lock whose
// writer is a Lock of the same key: [*lock.Client] is one (see
// [lock.Client.RLock]). RLock waits for a read hold, behind any writer
// that holds or waits for the key, until ctx ends or the wait set with
// [lock.WithMaxWait] passes; TryRLock makes one attempt, and fails with
// an error matching [lock.ErrNotObtained] when a writer holds the key or
// waits for it. Both return the hold's context, which [lock.Held]
// reports holding key, and the function that releases it.
type RLocker interface {
	RLock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error)
	TryRLock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error)
}

// RLock returns gin middleware that holds key shared while the rest of
// the handler chain runs: any number of requests with the same key run
// it together, across replicas, but never while a request holds the key
// through [New] or [Wrap], its writers:
//
//	r.GET("/config/:id", ginlock.RLock(locker, "config:{id}"), readConfig)
//	r.PUT("/config/:id", ginlock.New(locker, "config:{id}"), writeConfig)
//
// The read hold is taken with locker.TryRLock (locker.RLock with
// [WithWait]). While a writer holds the key, or waits for it (so that a
// steady stream of readers does not starve writers), a read is answered
// 409 Conflict with Retry-After and a problem body, or waits with
// [WithWait]; everything else is as for New, with a read hold for the
// lock. A read inside a New of the same key (a writer's route group)
// re-enters the write lock. A New inside an RLock of the same key would
// wait for itself: it is answered 500, with an error wrapping
// [lock.ErrInvalid] passed to [gin.Context.Error], as is a read of a key
// used by a [Limit].
//
// RLock panics, as New does, when locker is nil or the template or an
// option is invalid.
func RLock(locker RLocker, key string, opts ...Option) gin.HandlerFunc {
	m := mustMiddleware("RLock", key, opts, httpkit.ReadKind(locker))
	return func(c *gin.Context) { m.serve(c, nil) }
}
