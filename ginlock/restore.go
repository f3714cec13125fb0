package ginlock

import (
	"context"
	"net/http"
	"reflect"
)

// restore gives back, after the handler chain, the request the chain left
// with the cancellation, deadline and values of outer, the context the
// middleware was given: an outer middleware sees the request's own context
// again, not the ended lock context, plus the values the inner chain
// attached (for an access log, say).
func restore(outer context.Context, lockCtx context.Context, req *http.Request) *http.Request {
	inner := req.Context()
	if inner == lockCtx {
		return req.WithContext(outer)
	}
	return req.WithContext(&afterChain{Context: outer, lockCtx: lockCtx, inner: inner})
}

// afterChain is outer with the values the inner chain added below the lock
// context. A value the inner context shares with the lock context came
// from the lock context or above it, and is outer's instead, and so is
// the context package's own: so the lock and its cancellation are gone.
type afterChain struct {
	context.Context // outer
	lockCtx, inner  context.Context
}

func (a *afterChain) Value(key any) any {
	v := a.inner.Value(key)
	if same(v, a.lockCtx.Value(key)) || fromContextPackage(v) {
		return a.Context.Value(key)
	}
	return v
}

// fromContextPackage reports whether v is the context package's own
// bookkeeping (what context.Cause and cancellation look up): that is
// outer's, never the inner chain's.
func fromContextPackage(v any) bool {
	t := reflect.TypeOf(v)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() == "context"
}

// same reports whether a and b are equal; values that cannot be compared
// count as different.
func same(a, b any) bool {
	if a == nil || b == nil {
		return a == b
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}
