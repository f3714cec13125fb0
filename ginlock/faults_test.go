package ginlock_test

import (
	"context"
	"errors"
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
	locktest.CheckProblem(t, w, http.StatusConflict)
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
	locktest.CheckProblem(t, w, http.StatusServiceUnavailable)
	check("closed", w, errs)

	// stalled Redis
	stalledLocker := locktest.NewClient(t, srv.Client(t))
	srv.Pause()
	errs = nil
	w = do(route(stalledLocker, &errs, func(*gin.Context) { t.Error("handler ran") },
		ginlock.WithAcquireTimeout(200*time.Millisecond)), request())
	srv.Resume()
	locktest.CheckProblem(t, w, http.StatusServiceUnavailable)
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
