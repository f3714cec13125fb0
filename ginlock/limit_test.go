package ginlock_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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

// reportsKey is the key template of the report routes: one semaphore per
// tenant.
const reportsKey = "reports:{header.X-Tenant}"

// reportRoute returns an engine serving POST /reports behind ginlock.Limit
// of reportsKey with limit, recording c.Errors in errs and calling h.
func reportRoute(limiter ginlock.Limiter, limit int, errs *[]error, h gin.HandlerFunc, opts ...ginlock.Option) *gin.Engine {
	r := gin.New()
	r.Use(errorsOf(errs))
	r.POST("/reports", ginlock.Limit(limiter, reportsKey, limit, opts...), h)
	return r
}

// report serves POST /reports for tenant on r.
func report(r http.Handler, tenant string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/reports", nil)
	req.Header.Set("X-Tenant", tenant)
	return do(r, req)
}

// gauge counts the handlers running at once and the most that ever did.
type gauge struct{ in, most atomic.Int32 }

func (g *gauge) enter() {
	n := g.in.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
}

func (g *gauge) exit() { g.in.Add(-1) }

// 20 requests for one tenant at once, spread over two replicas (each its
// own lock Client and connection pool): the first 3 run, together, and
// the other 17 are answered 429 with Retry-After and a problem body while
// those 3 still run. Once they return, the tenant's permits are free.
func TestLimitAdmitsAtMostLimitRequests(t *testing.T) {
	srv := redistest.Start(t)
	const limit, requests = 3, 20
	var g gauge
	entered := make(chan struct{}, requests)
	finish := make(chan struct{})
	var errs [2][]error
	var replicas [2]*gin.Engine
	for i := range replicas {
		replicas[i] = reportRoute(locktest.NewClient(t, srv.Client(t)), limit, &errs[i], func(c *gin.Context) {
			g.enter()
			defer g.exit()
			entered <- struct{}{}
			<-finish
			c.Status(http.StatusOK)
		})
	}

	answers := make(chan *httptest.ResponseRecorder, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- report(replicas[i%2], "acme")
		}()
	}
	// Every request but those running is answered while they still run.
	for range requests - limit {
		select {
		case w := <-answers:
			locktest.CheckProblem(t, w, http.StatusTooManyRequests)
			if got := w.Header().Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After = %q, want 1 (the default hint)", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d handlers running, the other requests not all answered", g.in.Load())
		}
	}
	if n := len(entered); n != limit {
		t.Errorf("%d handlers entered with %d requests answered 429, want %d", n, requests-limit, limit)
	}
	close(finish)
	wg.Wait()
	close(answers)
	for w := range answers {
		if w.Code != http.StatusOK {
			t.Errorf("a running request got %d, want 200", w.Code)
		}
	}
	if most := g.most.Load(); most != limit {
		t.Errorf("at most %d handlers ran at once, want %d", most, limit)
	}
	if len(errs[0])+len(errs[1]) != 0 {
		t.Errorf("c.Errors = %v, want none: a full key is not an error", errs)
	}
	released(t)
	for i := range limit {
		if w := report(replicas[i%2], "acme"); w.Code != http.StatusOK {
			t.Fatalf("request %d after the others returned: %d, want 200", i, w.Code)
		}
	}
}

// A tenant that uses its whole limit does not hold up another tenant.
func TestLimitKeysAreIndependent(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	entered, finish := make(chan struct{}), make(chan struct{})
	var errs []error
	r := reportRoute(locker, 1, &errs, func(c *gin.Context) {
		if c.GetHeader("X-Tenant") == "acme" && c.Query("second") == "" {
			close(entered)
			<-finish
		}
		c.Status(http.StatusOK)
	})
	done := make(chan int)
	go func() { done <- report(r, "acme").Code }()
	<-entered
	if w := report(r, "globex"); w.Code != http.StatusOK {
		t.Errorf("another tenant: %d, want 200 while acme uses its limit", w.Code)
	}
	req := httptest.NewRequest(http.MethodPost, "/reports?second=1", nil)
	req.Header.Set("X-Tenant", "acme")
	locktest.CheckProblem(t, do(r, req), http.StatusTooManyRequests)
	close(finish)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("acme's first request: %d, want 200", code)
	}
}

// queued waits until n requests are queued for the Redis key of lock key
// key.
func queued(t *testing.T, rdb *redis.Client, key string, n int64) {
	t.Helper()
	waitFor(t, 5*time.Second, "requests queued", func() bool {
		return rdb.LLen(context.Background(), redisKey(key)+":queue").Val() == n
	})
}

// With WithWait, a request for a full key waits for a permit instead of
// a 429, runs once a holder (on another replica) gives one back, and gets
// the 429 when the wait ends first.
func TestLimitWaitsWithWait(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	other := locktest.NewClient(t, srv.Client(t)) // another replica
	const limit = 2
	var unlocks []lock.UnlockFunc
	for range limit {
		_, unlock, err := other.Acquire(context.Background(), "reports:acme", limit)
		if err != nil {
			t.Fatal(err)
		}
		unlocks = append(unlocks, unlock)
	}

	var errs []error
	var ran atomic.Int64 // UnixNano
	r := reportRoute(locktest.NewClient(t, rdb), limit, &errs, func(c *gin.Context) {
		ran.Store(time.Now().UnixNano())
		c.Status(http.StatusOK)
	}, ginlock.WithWait(10*time.Second))
	done := make(chan int)
	go func() { done <- report(r, "acme").Code }()
	queued(t, rdb, "reports:acme", 1)
	gaveBack := time.Now()
	if err := unlocks[0](); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("status %d, want 200 once a permit came back; errors %v", code, errs)
	}
	if time.Unix(0, ran.Load()).Before(gaveBack) {
		t.Fatal("handler ran before a permit came back")
	}

	// Both permits held again: the wait ends with a 429.
	_, unlock, err := other.Acquire(context.Background(), "reports:acme", limit)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	defer unlocks[1]()
	const wait = 200 * time.Millisecond
	r = reportRoute(locktest.NewClient(t, rdb), limit, &errs, func(*gin.Context) { t.Error("handler ran") }, ginlock.WithWait(wait))
	start := time.Now()
	w := report(r, "acme")
	if took := time.Since(start); took < wait {
		t.Errorf("answered after %v, before the wait of %v", took, wait)
	}
	locktest.CheckProblem(t, w, http.StatusTooManyRequests)
	if w.Header().Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	if len(errs) != 0 {
		t.Errorf("c.Errors = %v, want none", errs)
	}
}

// Many requests waiting with WithWait on two replicas all run, never more
// than limit at once.
func TestLimitWaitersNeverExceedLimit(t *testing.T) {
	srv := redistest.Start(t)
	const limit, requests = 3, 60
	var g gauge
	var errs [2][]error
	var replicas [2]*gin.Engine
	for i := range replicas {
		replicas[i] = reportRoute(locktest.NewClient(t, srv.Client(t)), limit, &errs[i], func(c *gin.Context) {
			g.enter()
			time.Sleep(5 * time.Millisecond)
			g.exit()
			c.Status(http.StatusOK)
		}, ginlock.WithWait(30*time.Second))
	}
	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w := report(replicas[i%2], "acme"); w.Code == http.StatusOK {
				ok.Add(1)
			} else {
				t.Errorf("status %d, want 200 after waiting", w.Code)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d requests served, at most %d at once", ok.Load(), g.most.Load())
	if most := g.most.Load(); most > limit {
		t.Errorf("%d handlers ran at once, limit %d", most, limit)
	}
	if ok.Load() != requests {
		t.Errorf("%d of %d requests served", ok.Load(), requests)
	}
}

// A handler that panics gives its permit back before the panic reaches
// gin's recovery.
func TestLimitReleasesOnPanic(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var recovered any
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, v any) {
		recovered = v
		if lock.Held(c.Request.Context(), "reports:acme") {
			t.Error("permit still held when the panic reached recovery")
		}
		c.AbortWithStatus(http.StatusInternalServerError)
	}))
	panics := true
	r.POST("/reports", ginlock.Limit(locker, reportsKey, 1), func(c *gin.Context) {
		if panics {
			panic("out of paper")
		}
		c.Status(http.StatusOK)
	})
	if w := report(r, "acme"); w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500 from recovery", w.Code)
	}
	if recovered != "out of paper" {
		t.Fatalf("recovery got %v, want the handler's panic", recovered)
	}
	released(t)
	panics = false
	// With a limit of 1, a permit still held would answer 429.
	if w := report(r, "acme"); w.Code != http.StatusOK {
		t.Fatalf("next request: status %d, want 200", w.Code)
	}
}
