package httpkit

import (
	"context"
	"sync"
)

// wraps is a request's hold of a key, in the handler's context, and counts
// the wrapped middlewares running that re-entered it (a ginlock.Wrap, an
// httplock middleware): the middleware that took it ends the hold
// (cancels its lock context and releases) once its chain has returned and
// they all have, so that a wrapped handler run detached from the outer
// chain (behind a timeout middleware) holds the key while it runs, as it
// does without an outer middleware.
type wraps struct {
	key    string
	locker any    // of the hold; one of another Locker (or of one not comparable) does not enter
	outer  *wraps // the hold the request had when this one was taken, or nil
	mu     sync.Mutex
	n      int    // wrapped middlewares in it, running
	ended  bool   // the chain returned: none enters any more
	finish func() // ends the hold once n is 0
}

// holdKey is the context key of the request's innermost hold, a *wraps.
type holdKey struct{}

// enclosing returns the wraps of the innermost hold of key that an outer
// middleware using locker put in ctx, or nil.
func enclosing(ctx context.Context, locker any, key string) *wraps {
	w := innermostHold(ctx)
	for w != nil && w.key != key {
		w = w.outer
	}
	if w == nil || !same(w.locker, locker) {
		return nil
	}
	return w
}

// innermostHold returns the innermost hold a middleware put in ctx, or nil.
func innermostHold(ctx context.Context) *wraps {
	w, _ := ctx.Value(holdKey{}).(*wraps)
	return w
}

// HeldKey returns the key of the innermost hold a middleware put in ctx,
// the handler's context, or "" outside one.
func HeldKey(ctx context.Context) string {
	if w := innermostHold(ctx); w != nil {
		return w.key
	}
	return ""
}

// enter counts a wrapped middleware in, unless the chain returned already.
func (w *wraps) enter() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return false
	}
	w.n++
	return true
}

// exit counts a wrapped middleware out, ending the hold if it was the last after the
// chain returned.
func (w *wraps) exit() {
	w.mu.Lock()
	w.n--
	f := w.finish
	if w.n > 0 {
		f = nil
	} else {
		w.finish = nil
	}
	w.mu.Unlock()
	if f != nil {
		f()
	}
}

// afterChain runs finish, which ends the hold, now, or when the last wrapped
// middleware in it exits.
func (w *wraps) afterChain(finish func()) {
	w.mu.Lock()
	w.ended = true
	if w.n > 0 {
		w.finish = finish
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	finish()
}
