package httpkit

import (
	"context"
	"fmt"
	"net/http"

	"github.com/lockkit/lockkit/lock"
)

// Kind is how a middleware holds the request's key: what it takes the key
// with, and how it answers a request turned away because the key is full.
type Kind struct {
	// Locker is the Locker (or other interface value) the key is taken
	// from: a wrapped middleware re-enters only an outer hold taken from
	// the same one.
	Locker any
	Iface  string // the name of Locker's interface, for messages: "Locker"
	// take takes key: queued (with a wait) when wait is set, else in one
	// attempt.
	take       func(ctx context.Context, key string, wait bool, opts []lock.LockOption) (context.Context, lock.UnlockFunc, error)
	BusyStatus int    // the default status of the answer to a full key
	BusyDetail string // the answer's detail for a full key, before "; retry in N s"
}

// LockKind holds the key exclusively with locker.TryLock, or locker.Lock
// to wait; a held key is answered 409 Conflict by default.
func LockKind(locker lock.Locker) Kind {
	return Kind{
		Locker: locker,
		Iface:  "Locker",
		take: func(ctx context.Context, key string, wait bool, opts []lock.LockOption) (context.Context, lock.UnlockFunc, error) {
			if wait {
				return locker.Lock(ctx, key, opts...)
			}
			return locker.TryLock(ctx, key, opts...)
		},
		BusyStatus: http.StatusConflict,
		BusyDetail: "another request holds the lock on this resource",
	}
}

// Limiter is the method set of ginlock.Limiter and httplock.Limiter.
type Limiter interface {
	Acquire(ctx context.Context, key string, limit int, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error)
	TryAcquire(ctx context.Context, key string, limit int, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error)
}

// PermitKind holds one of limit permits of the key, taken with
// limiter.TryAcquire, or limiter.Acquire to wait; a full key is answered
// 429 Too Many Requests by default.
func PermitKind(limiter Limiter, limit int) Kind {
	return Kind{
		Locker: limiter,
		Iface:  "Limiter",
		take: func(ctx context.Context, key string, wait bool, opts []lock.LockOption) (context.Context, lock.UnlockFunc, error) {
			if wait {
				return limiter.Acquire(ctx, key, limit, opts...)
			}
			return limiter.TryAcquire(ctx, key, limit, opts...)
		},
		BusyStatus: http.StatusTooManyRequests,
		BusyDetail: fmt.Sprintf("the limit of %d concurrent requests for this resource is reached", limit),
	}
}

// RLocker is the method set of ginlock.RLocker and httplock.RLocker.
type RLocker interface {
	RLock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error)
	TryRLock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error)
}

// ReadKind holds the key shared with locker.TryRLock, or locker.RLock to
// wait; a key a writer holds or waits for is answered 409 Conflict by
// default.
func ReadKind(locker RLocker) Kind {
	return Kind{
		Locker: locker,
		Iface:  "RLocker",
		take: func(ctx context.Context, key string, wait bool, opts []lock.LockOption) (context.Context, lock.UnlockFunc, error) {
			if wait {
				return locker.RLock(ctx, key, opts...)
			}
			return locker.TryRLock(ctx, key, opts...)
		},
		BusyStatus: http.StatusConflict,
		BusyDetail: "another request writes this resource, or waits to",
	}
}

// isNil reports whether locker is nil or a nil *lock.Client.
func isNil(locker any) bool {
	c, ok := locker.(*lock.Client)
	return locker == nil || ok && c == nil
}
