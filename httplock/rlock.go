package httplock

import (
	"context"
	"net/http"

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

// RLock returns net/http middleware that holds key shared while the
// handler it wraps runs: any number of requests with the same key run it
// together, across replicas, but never while a request holds the key
// through [New], its writers:
//
//	mux.Handle("GET /config/{id}", httplock.RLock(locker, "config:{id}")(readConfig))
//	mux.Handle("PUT /config/{id}", httplock.New(locker, "config:{id}")(writeConfig))
//
// While a writer holds the key or waits for it, a read is answered 409
// Conflict with Retry-After, or waits with [WithWait]; everything else is
// as for New, with a read hold for the lock, and as for ginlock.RLock
// (see [github.com/lockkit/lockkit/ginlock.RLock]).
//
// RLock panics, as New does, when locker is nil or the template or an
// option is invalid.
func RLock(locker RLocker, key string, opts ...Option) func(http.Handler) http.Handler {
	return mustMiddleware("RLock", key, opts, httpkit.ReadKind(locker)).wrap
}
