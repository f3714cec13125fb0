package ginlock

import (
	"context"
	"net/http"

	"github.com/lockkit/lockkit/lock"
)

// kind is how a middleware holds the request's key: what it takes the key
// with, and how it answers a request turned away because the key is full.
// [New] and [Wrap] take a lock; the other constructors build their kind
// the same way around their own interface.
type kind struct {
	// locker is the Locker (or other interface value) the key is taken
	// from: a Wrap re-enters only an outer hold taken from the same one.
	locker any
	iface  string // the name of locker's interface, for messages: "Locker"
	// take takes key: queued (with WithWait) when wait is set, else in one
	// attempt.
	take   func(ctx context.Context, key string, wait bool, opts []lock.LockOption) (context.Context, lock.UnlockFunc, error)
	status int    // the default status of the answer to a full key
	full   string // the answer's detail for a full key, before "; retry in N s"
}

// lockKind holds the key with locker.TryLock, or locker.Lock to wait.
func lockKind(locker lock.Locker) kind {
	return kind{
		locker: locker,
		iface:  "Locker",
		take: func(ctx context.Context, key string, wait bool, opts []lock.LockOption) (context.Context, lock.UnlockFunc, error) {
			if wait {
				return locker.Lock(ctx, key, opts...)
			}
			return locker.TryLock(ctx, key, opts...)
		},
		status: http.StatusConflict,
		full:   "another request holds the lock on this resource",
	}
}

// acquire takes key for a request whose context is ctx, within the
// acquisition bound (and ctx's cancellation, deadline included).
func (m *middleware) acquire(ctx context.Context, key string) (context.Context, lock.UnlockFunc, error) {
	if _, ok := ctx.Deadline(); ok {
		ctx = noDeadline{ctx}
	}
	return m.take(ctx, key, m.cfg.waitSet, m.cfg.lockOpts)
}

// isNil reports whether locker is nil or a nil *lock.Client.
func isNil(locker any) bool {
	c, ok := locker.(*lock.Client)
	return locker == nil || ok && c == nil
}
