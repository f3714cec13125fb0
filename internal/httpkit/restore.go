package httpkit

import (
	"context"
	"net/http"
	"reflect"
)

// Restore gives back, after the handler chain, the request the chain left
// with the cancellation, deadline and values of outer, the context the
// middleware was given: an outer middleware sees the request's own context
// again, not the ended lock context lockCtx, plus the values the inner
// chain attached (for an access log, say). It is for frameworks whose
// middlewares share one request across the chain, as gin's do.
func Restore(outer context.Context, lockCtx context.Context, req *http.Request) *http.Request {
	inner := req.Context()
	if inner == lockCtx {
		return req.WithContext(outer)
	}
	return req.WithContext(&afterChain{Context: outer, lockCtx: lockCtx, inner: inner})
}

// afterChain is outer with the values the inner chain added below the lock
// context. A value the inner context shares with the lock context came
// from the lock context or above it, and is outer's instead, and so is
// what context.Cause and cancellation look up: so the lock and its
// cancellation are gone.
type afterChain struct {
	context.Context // outer
	lockCtx, inner  context.Context
}

func (a *afterChain) Value(key any) any {
	if key == cancelKey {
		return a.Context.Value(key)
	}
	v := a.inner.Value(key)
	if same(v, a.lockCtx.Value(key)) {
		return a.Context.Value(key)
	}
	return v
}

// cancelKey is the context package's own key for the cancellation a
// context derives from, found once by asking context.Cause for it.
var cancelKey = func() any {
	p := &keyProbe{}
	_ = context.Cause(p)
	return p.key
}()

type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any { p.key = key; return nil }
func (p *keyProbe) Err() error        { return context.Canceled } // so Cause looks further

// same reports whether a and b are the same value; values that cannot be
// compared (maps, slices, also inside interfaces) count as different.
func same(a, b any) bool {
	if a == nil || b == nil {
		return a == b
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && va.Comparable() && vb.Comparable() && a == b
}
