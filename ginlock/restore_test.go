package ginlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// A value an outer middleware attached before ginlock, of a comparable
// struct type whose interface field holds a map (JWT claims, say), must
// still be readable after the chain once the inner chain attached a value
// of its own: reading it must not panic.
func TestOuterValueWithUncomparableFieldReadableAfterChain(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	type principal struct {
		Name   string
		Claims any // map[string]any from a JWT
	}
	type principalKey struct{}
	type traceKey struct{}
	var got any
	var panicked any
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), principalKey{},
			principal{Name: "alice", Claims: map[string]any{"role": "admin"}}))
		c.Next()
		func() {
			defer func() { panicked = recover() }()
			got = c.Request.Context().Value(principalKey{}) // the access log reads the user
		}()
	})
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), traceKey{}, "abc"))
		c.Status(http.StatusOK)
	})
	if w := post(r, "/orders/42/pay"); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if panicked != nil {
		t.Fatalf("ctx.Value after the chain panicked: %v", panicked)
	}
	if p, ok := got.(principal); !ok || p.Name != "alice" {
		t.Fatalf("value after the chain = %#v, want the principal", got)
	}
}

// The same with a value the inner chain shadows with another of the same
// type: the inner one wins, and nothing panics.
func TestInnerShadowedUncomparableValueAfterChain(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	type attrs [1]any
	type attrsKey struct{}
	var got any
	var panicked any
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), attrsKey{}, attrs{[]string{"outer"}}))
		c.Next()
		func() {
			defer func() { panicked = recover() }()
			got = c.Request.Context().Value(attrsKey{})
		}()
	})
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), attrsKey{}, attrs{[]string{"inner"}}))
	})
	post(r, "/orders/42/pay")
	if panicked != nil {
		t.Fatalf("ctx.Value after the chain panicked: %v", panicked)
	}
	if a, ok := got.(attrs); !ok || fmt.Sprint(a[0]) != "[inner]" {
		t.Fatalf("value after the chain = %#v, want the inner chain's", got)
	}
}

// Values the inner chain attached whose type happens to come from package
// context (a CancelFunc, a detached context) are the inner chain's values
// like any other, not the context package's bookkeeping.
func TestInnerContextTypedValuesSurvive(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	type cancelKey struct{}
	type detachedKey struct{}
	var gotCancel, gotDetached any
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		gotCancel = c.Request.Context().Value(cancelKey{})
		gotDetached = c.Request.Context().Value(detachedKey{})
	})
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		ctx, cancel := context.WithCancel(c.Request.Context())
		ctx = context.WithValue(ctx, cancelKey{}, cancel)
		ctx = context.WithValue(ctx, detachedKey{}, context.WithoutCancel(ctx))
		c.Request = c.Request.WithContext(ctx)
	})
	post(r, "/orders/42/pay")
	if _, ok := gotCancel.(context.CancelFunc); !ok {
		t.Errorf("inner chain's context.CancelFunc value after the chain = %v, want it kept", gotCancel)
	}
	if _, ok := gotDetached.(context.Context); !ok {
		t.Errorf("inner chain's context.Context value after the chain = %v, want it kept", gotDetached)
	}
}

// An outer middleware that put a deadline with a cause on the request sees
// the same Err and Cause after the chain as the request's own context,
// also when the inner chain detached its context with WithoutCancel.
func TestCauseAfterChainMatchesOuter(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	errSlow := errors.New("request budget spent")
	type traceKey struct{}
	for _, tc := range []struct {
		name  string
		inner func(ctx context.Context) context.Context
	}{
		{"unchanged", func(ctx context.Context) context.Context { return ctx }},
		{"value", func(ctx context.Context) context.Context { return context.WithValue(ctx, traceKey{}, 1) }},
		{"WithoutCancel", func(ctx context.Context) context.Context {
			return context.WithValue(context.WithoutCancel(ctx), traceKey{}, 1)
		}},
	} {
		var ownCause, afterCause, afterErr error
		var sawDone bool
		r := gin.New()
		r.Use(func(c *gin.Context) {
			ctx, cancel := context.WithTimeoutCause(c.Request.Context(), time.Hour, errSlow)
			defer cancel()
			own, ownCancel := context.WithCancelCause(ctx)
			c.Request = c.Request.WithContext(own)
			c.Next()
			ownCancel(errSlow) // the budget is spent after the chain
			after := c.Request.Context()
			select {
			case <-after.Done():
				sawDone = true
			case <-time.After(time.Second):
			}
			ownCause, afterCause, afterErr = context.Cause(own), context.Cause(after), after.Err()
		})
		r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
			c.Request = c.Request.WithContext(tc.inner(c.Request.Context()))
		})
		post(r, "/orders/42/pay")
		if !sawDone || afterErr != context.Canceled || afterCause != ownCause {
			t.Errorf("%s: after the chain Done %v, Err %v, Cause %v; want done, Canceled, %v",
				tc.name, sawDone, afterErr, afterCause, ownCause)
		}
	}
}

// After the chain, Key and FencingToken report nothing to the middlewares
// around ginlock: the lock is released and its key may carry user data.
func TestKeyNotLeftBehindAfterChain(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var key string
	var keys map[any]any
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		key = ginlock.Key(c)
		keys = c.Keys
	})
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {})
	if w := post(r, "/orders/alice@example.com/pay"); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if key != "" {
		t.Errorf("Key(c) after the chain = %q, want \"\" (the lock is released)", key)
	}
	for k, v := range keys {
		if s, ok := v.(string); ok && strings.Contains(s, "alice") {
			t.Errorf("c.Keys[%v] = %q after the chain: the raw key stays in the gin.Context", k, s)
		}
	}
}

// Under two ginlock middlewares with different keys, Key and FencingToken
// give the inner key in the handler and the outer one again after the
// inner middleware, also when the handler panics.
func TestNestedKeysRestoredAfterInner(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locker := locktest.NewClient(t, rdb)
	type seen struct {
		key   string
		token uint64
		ok    bool
		held  bool
	}
	var inHandler, afterInner seen
	var outerToken uint64
	var heldInRecovery []string
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, _ any) {
		released(t) // started before the panic reached recovery
		for _, k := range []string{"tenants:t1", "orders:42"} {
			if locktest.Held(t, rdb, redisKey(k)) {
				heldInRecovery = append(heldInRecovery, k)
			}
		}
		c.AbortWithStatus(http.StatusInternalServerError)
	}))
	g := r.Group("/tenants/:tenant", ginlock.New(locker, "tenants:{tenant}"), func(c *gin.Context) {
		outerToken, _ = ginlock.FencingToken(c)
		c.Next()
		afterInner.key = ginlock.Key(c)
		afterInner.token, afterInner.ok = ginlock.FencingToken(c)
		afterInner.held = lock.Held(c.Request.Context(), "tenants:t1") && !lock.Held(c.Request.Context(), "orders:42")
	})
	g.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		inHandler.key = ginlock.Key(c)
		inHandler.token, inHandler.ok = ginlock.FencingToken(c)
		inHandler.held = lock.Held(c.Request.Context(), "tenants:t1") && lock.Held(c.Request.Context(), "orders:42")
		if c.Query("panic") != "" {
			panic("boom")
		}
	})
	for _, target := range []string{"/tenants/t1/orders/42/pay", "/tenants/t1/orders/42/pay?panic=1"} {
		inHandler, afterInner, heldInRecovery = seen{}, seen{}, nil
		w := post(r, target)
		if inHandler.key != "orders:42" || !inHandler.ok || !inHandler.held {
			t.Errorf("%s: in the handler %+v, want orders:42 with a token, both keys held", target, inHandler)
		}
		if strings.Contains(target, "panic") {
			if w.Code != http.StatusInternalServerError || len(heldInRecovery) != 0 {
				t.Errorf("%s: status %d, keys held at recovery %v; want 500, none", target, w.Code, heldInRecovery)
			}
			continue
		}
		if afterInner.key != "tenants:t1" || !afterInner.ok || afterInner.token != outerToken || !afterInner.held {
			t.Errorf("%s: after the inner middleware %+v, want tenants:t1 with its token %d, only it held", target, afterInner, outerToken)
		}
	}
	released(t)
	for _, k := range []string{"tenants:t1", "orders:42"} {
		if locktest.Held(t, rdb, redisKey(k)) {
			t.Errorf("%s still held after the requests", k)
		}
	}
}
