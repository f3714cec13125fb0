package ginlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

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

// Two replicas (separate lock Clients on one Redis), a short lease renewed
// by the watchdog, slow handlers that finish deliberately whatever the
// client does, clients that give up early and retry: never two handlers
// for one order at once.
func TestTwoReplicasSlowHandlersWithDisconnectsNeverOverlap(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 300 * time.Millisecond // renewed every 100 ms
	var inside, overlaps, ran atomic.Int32
	pay := func(c *gin.Context) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		ran.Add(1)
		// Past the lease, whatever the client does.
		d := time.Duration(20+rand.IntN(500)) * time.Millisecond
		time.Sleep(d)
		inside.Add(-1)
		c.Status(http.StatusOK)
	}
	var servers [2]*httptest.Server
	for i := range servers {
		r := gin.New()
		locker := locktest.NewClient(t, srv.Client(t))
		opts := []ginlock.Option{ginlock.WithLockOptions(lock.WithLease(lease))}
		r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}", opts...), pay)
		r.POST("/orders/:id/pay-wait", ginlock.New(locker, "orders:{id}", append(opts, ginlock.WithWait(400*time.Millisecond))...), pay)
		servers[i] = httptest.NewServer(r)
		defer servers[i].Close()
	}
	deadline := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	codes := map[string]int{}
	var mu sync.Mutex
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				s := servers[(g+i)%2]
				path := "/orders/42/pay"
				if i%3 == 0 {
					path += "-wait"
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(30+rand.IntN(300))*time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, nil)
				resp, err := s.Client().Do(req)
				code := "gave up"
				if err == nil {
					code = strconv.Itoa(resp.StatusCode)
					resp.Body.Close()
				}
				cancel()
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("answers %v, handlers run %d", codes, ran.Load())
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d handlers ran while another handler of the same order was running", n)
	}
	if ran.Load() < 3 {
		t.Fatalf("only %d handlers ran: the test proves nothing", ran.Load())
	}
	for code := range codes {
		if code != "200" && code != "409" && code != "gave up" {
			t.Errorf("unexpected answer %s", code)
		}
	}
}

// Fencing tokens strictly increase across requests served by two replicas.
func TestFencingTokensIncreaseAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	var replicas [2]*gin.Engine
	var tokens []uint64
	for i := range replicas {
		replicas[i] = gin.New()
		replicas[i].POST("/orders/:id/pay", ginlock.New(locktest.NewClient(t, srv.Client(t)), "orders:{id}"), func(c *gin.Context) {
			tok, ok := ginlock.FencingToken(c)
			if !ok {
				t.Error("no fencing token in the handler")
			}
			tokens = append(tokens, tok)
		})
	}
	for i := range 20 {
		if w := post(replicas[i%2], "/orders/a:b/pay"); w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d", i, w.Code)
		}
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens %v do not strictly increase", tokens)
		}
	}
}

// 50 requests at once on a stalled Redis, for one key and for distinct
// keys: each gets a 503 within about the acquisition timeout; once Redis
// resumes, the key is free again soon (no abandoned acquisition keeps it
// for a lease), and the goroutines of the cut-off calls end.
func TestStalledRedisUnderLoadAnswersFastAndRecovers(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ginlock.Option
		wait time.Duration
	}{
		{"TryLock", nil, 0},
		{"WithWait", []ginlock.Option{ginlock.WithWait(300 * time.Millisecond)}, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			locker := locktest.NewClient(t, srv.Client(t))
			var ran atomic.Int32
			r := gin.New()
			r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}", tc.opts...), func(c *gin.Context) {
				ran.Add(1)
				c.Status(http.StatusOK)
			})
			if w := post(r, "/orders/42/pay"); w.Code != http.StatusOK { // warm up
				t.Fatalf("status %d", w.Code)
			}
			ran.Store(0)
			baseline := runtime.NumGoroutine()
			srv.Pause()
			t.Cleanup(srv.Resume)
			limit := ginlock.DefaultAcquireTimeout
			if tc.wait > 0 {
				limit = tc.wait
			}
			const n = 50
			var wg sync.WaitGroup
			type result struct {
				code  int
				took  time.Duration
				retry string
			}
			results := make([]result, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					target := "/orders/42/pay"
					if i%2 == 1 {
						target = "/orders/" + strconv.Itoa(i) + "/pay"
					}
					start := time.Now()
					w := post(r, target)
					results[i] = result{w.Code, time.Since(start), w.Header().Get("Retry-After")}
				}()
			}
			wg.Wait()
			var slowest time.Duration
			for i, res := range results {
				slowest = max(slowest, res.took)
				if res.code != http.StatusServiceUnavailable || res.retry != "1" {
					t.Errorf("request %d: %d Retry-After %q, want 503 with 1", i, res.code, res.retry)
				}
			}
			t.Logf("slowest 503 after %v (limit %v)", slowest, limit)
			if slowest > limit+500*time.Millisecond {
				t.Errorf("slowest 503 after %v, want within %v", slowest, limit)
			}
			if ran.Load() != 0 {
				t.Errorf("%d handlers ran on a stalled Redis", ran.Load())
			}
			stalled := runtime.NumGoroutine()
			srv.Resume()
			start := time.Now()
			for {
				w := post(r, "/orders/42/pay")
				if w.Code == http.StatusOK {
					break
				}
				if time.Since(start) > 5*time.Second {
					t.Fatalf("key still refused %v after Redis resumed: %d %s", time.Since(start), w.Code, w.Body)
				}
				time.Sleep(20 * time.Millisecond)
			}
			freeAfter := time.Since(start)
			t.Logf("key free %v after Redis resumed", freeAfter)
			if freeAfter > 2*time.Second {
				t.Errorf("key free only %v after Redis resumed, want within ~1 s", freeAfter)
			}
			for runtime.NumGoroutine() > baseline+5 {
				if time.Since(start) > 6*time.Second {
					t.Fatalf("%d goroutines %v after resume (baseline %d, %d while stalled)",
						runtime.NumGoroutine(), time.Since(start), baseline, stalled)
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("goroutines: baseline %d, while stalled %d, settled after %v", baseline, stalled, time.Since(start))
		})
	}
}

// Nothing the middleware answers or passes to c.Error carries the raw
// key, whatever the request puts into it: path, query and header values,
// on a 409, a 503, a lost lease and a closed Client.
func TestRawKeyNeverInAnswersOrErrors(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	const secret = "alice-secret"
	tmpl := "t:{header.X-User}:{query.q}:{id}"
	key := "t:" + secret + "-h:" + secret + "-q:" + secret + "-p"
	check := func(name string, w *httptest.ResponseRecorder, errs []error) {
		t.Helper()
		for h, vs := range w.Header() {
			for _, v := range vs {
				if strings.Contains(v, secret) {
					t.Errorf("%s: header %s: %q carries the key", name, h, v)
				}
			}
		}
		if strings.Contains(w.Body.String(), secret) {
			t.Errorf("%s: body %s carries the key", name, w.Body)
		}
		for _, e := range errs {
			if strings.Contains(e.Error(), secret) {
				t.Errorf("%s: c.Error text %q carries the key", name, e)
			}
		}
	}
	request := func() *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/orders/"+secret+"-p/pay?q="+secret+"-q", nil)
		req.Header.Set("X-User", secret+"-h")
		return req
	}
	route := func(locker lock.Locker, errs *[]error, h gin.HandlerFunc, opts ...ginlock.Option) *gin.Engine {
		r := gin.New()
		r.Use(errorsOf(errs))
		r.POST("/orders/:id/pay", ginlock.New(locker, tmpl, opts...), h)
		return r
	}

	// 409
	locker := locktest.NewClient(t, rdb)
	_, unlock, err := locker.Lock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	w := do(route(locktest.NewClient(t, rdb), &errs, func(*gin.Context) { t.Error("handler ran") }), request())
	checkProblem(t, w, http.StatusConflict)
	check("409", w, errs)
	if len(errs) != 0 {
		t.Errorf("409: c.Errors %v, want none", errs)
	}
	_ = unlock()

	// lost lease, reported by the release
	errs = nil
	w = do(route(locker, &errs, func(c *gin.Context) {
		rdb.Del(context.Background(), redisKey(ginlock.Key(c)))
		<-c.Request.Context().Done()
	}, ginlock.WithLockOptions(lock.WithLease(90*time.Millisecond))), request())
	check("lost", w, errs)
	if len(errs) != 1 || !errors.Is(errs[0], lock.ErrLost) {
		t.Errorf("lost: c.Errors %v, want one ErrLost", errs)
	}

	// closed Client
	closed := locktest.NewClient(t, rdb)
	_ = closed.Close()
	errs = nil
	w = do(route(closed, &errs, func(*gin.Context) { t.Error("handler ran") }), request())
	checkProblem(t, w, http.StatusServiceUnavailable)
	check("closed", w, errs)

	// stalled Redis
	stalledLocker := locktest.NewClient(t, srv.Client(t))
	srv.Pause()
	errs = nil
	w = do(route(stalledLocker, &errs, func(*gin.Context) { t.Error("handler ran") },
		ginlock.WithAcquireTimeout(200*time.Millisecond)), request())
	srv.Resume()
	checkProblem(t, w, http.StatusServiceUnavailable)
	check("stalled", w, errs)
	if len(errs) != 1 {
		t.Errorf("stalled: c.Errors %v, want one", errs)
	}
}

// New refuses at registration the lock options that make every request
// fail with the lock Client it is given (here a lease too short for the
// Client's drift allowance), as Validate's contract promises for options:
// nothing is checked per request that could be checked at New.
func TestLockOptionsInvalidForTheClientRefusedAtNew(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb, lock.WithDrift(40*time.Millisecond))
	var errs []error
	var panicked any
	var r *gin.Engine
	func() {
		defer func() { panicked = recover() }()
		r = payRoute(locker, &errs, func(*gin.Context) {}, ginlock.WithLockOptions(lock.WithLease(60*time.Millisecond)))
	}()
	if panicked != nil {
		return // refused at registration, as wanted
	}
	w := post(r, "/orders/42/pay")
	t.Errorf("New accepted a lease of 60 ms on a Client with a 40 ms drift allowance; every request then gets %d (c.Errors %v)", w.Code, errs)
}

// latency delays every command of a Redis client by d: a Redis in another
// zone, slow but answering every call.
type latency struct{ d time.Duration }

func (l latency) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l latency) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(l.d)
		return next(ctx, cmd)
	}
}

func (l latency) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		time.Sleep(l.d)
		return next(ctx, cmds)
	}
}

// With a healthy Redis that answers every call in 15 ms (another zone),
// a request waits 60 ms for a key another replica holds for 50 ms: its
// wait runs out while its retry after the release is being answered. That
// is contention, not an unavailable Redis: 409, nothing passed to c.Error.
func TestWaitEndingDuringAnsweredRetryIsAConflict(t *testing.T) {
	srv := redistest.Start(t)
	holder := locktest.NewClient(t, srv.Client(t))
	slow := srv.Client(t)
	slow.AddHook(latency{15 * time.Millisecond})
	locker := locktest.NewClient(t, slow)
	var errs []error
	r := payRoute(locker, &errs, func(*gin.Context) {}, ginlock.WithWait(60*time.Millisecond))
	start0 := time.Now()
	// Warm up: connections, scripts, subscription (a cold start may 503).
	for ok := 0; ok < 3; {
		if w := post(r, "/orders/42/pay"); w.Code == http.StatusOK {
			ok++
		}
		if time.Since(start0) > 5*time.Second {
			t.Fatal("no 200 in warm-up")
		}
	}
	errs = nil
	_, unlock, err := holder.Lock(context.Background(), "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	release := time.AfterFunc(50*time.Millisecond, func() { _ = unlock() })
	defer release.Stop()
	start := time.Now()
	w := post(r, "/orders/42/pay")
	t.Logf("%d after %v, c.Errors %v", w.Code, time.Since(start), errs)
	if w.Code == http.StatusServiceUnavailable || len(errs) != 0 {
		t.Errorf("healthy Redis, key held for most of the wait: %d with c.Errors %v; want 409 (or 200) and none", w.Code, errs)
	}
	_ = unlock()
}
