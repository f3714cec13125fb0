package ginlock

import (
	"context"
	"sync"
)

// wraps counts the Wraps running that re-entered a request's hold, taken
// by an outer ginlock middleware of the request: that middleware ends its
// hold (cancels its lock context and releases) once its chain has
// returned and they all have, so that a Wrap run detached from the outer
// chain (behind a timeout middleware) holds the key while its handler
// runs, as a Wrap without an outer middleware does.
type wraps struct {
	locker any // of the hold; a Wrap of another Locker (or of one not comparable) does not enter
	mu     sync.Mutex
	n      int    // Wraps running
	ended  bool   // the chain returned: no more Wraps enter
	finish func() // ends the hold once n is 0
}

// wrapsKey is the context key of the wraps of the hold on key.
type wrapsKey struct{ key string }

// enclosing returns the wraps of the innermost hold of key that an outer
// ginlock middleware using locker put in ctx, or nil.
func enclosing(ctx context.Context, locker any, key string) *wraps {
	w, _ := ctx.Value(wrapsKey{key}).(*wraps)
	if w == nil || !same(w.locker, locker) {
		return nil
	}
	return w
}

// enter counts a Wrap in, unless the chain returned already.
func (w *wraps) enter() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return false
	}
	w.n++
	return true
}

// exit counts a Wrap out, ending the hold if it was the last after the
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

// afterChain runs finish, which ends the hold, now, or when the last Wrap
// in it exits.
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
