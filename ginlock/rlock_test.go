package ginlock_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// configRoutes returns an engine that reads config :id under
// ginlock.RLock (GET) and writes it under ginlock.New (PUT), with the
// same key template, calling read and write.
func configRoutes(locker *lock.Client, errs *[]error, read, write gin.HandlerFunc, writeOpts ...ginlock.Option) *gin.Engine {
	r := gin.New()
	r.Use(errorsOf(errs))
	r.GET("/config/:id", ginlock.RLock(locker, "config:{id}"), read)
	r.PUT("/config/:id", ginlock.New(locker, "config:{id}", writeOpts...), write)
	return r
}

// Readers of one key, on two replicas, all run at once: each handler
// returns only once all of them have entered.
func TestRLockReadersRunTogether(t *testing.T) {
	srv := redistest.Start(t)
	const readers = 10
	var g gauge
	var all sync.WaitGroup
	all.Add(readers)
	read := func(c *gin.Context) {
		g.enter()
		defer g.exit()
		all.Done()
		done := make(chan struct{})
		go func() { all.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("not all readers entered together")
		}
		c.Status(http.StatusOK)
	}
	var errs [2][]error
	var replicas [2]*gin.Engine
	for i := range replicas {
		replicas[i] = configRoutes(locktest.NewClient(t, srv.Client(t)), &errs[i], read, nil)
	}
	var wg sync.WaitGroup
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w := do(replicas[i%2], httptest.NewRequest(http.MethodGet, "/config/7", nil)); w.Code != http.StatusOK {
				t.Errorf("reader %d: %d, want 200; body %s", i, w.Code, w.Body)
			}
		}()
	}
	wg.Wait()
	if most := g.most.Load(); most != readers {
		t.Errorf("at most %d readers at once, want %d", most, readers)
	}
}

// A read route under RLock and a write route under New of the same key
// exclude each other: a read while a write runs, and a write while a read
// runs, get 409. A writer waiting (WithWait) holds up later readers, and
// runs once the readers before it have returned.
func TestRLockAndNewOfOneKeyExcludeEachOther(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locker := locktest.NewClient(t, rdb)
	entered, finish := make(chan string), make(chan struct{})
	block := func(what string) gin.HandlerFunc {
		return func(c *gin.Context) {
			if c.Query("block") != "" {
				entered <- what
				<-finish
			}
			c.Status(http.StatusOK)
		}
	}
	var errs []error
	r := configRoutes(locker, &errs, block("read"), block("write"), ginlock.WithWait(10*time.Second))
	get := func(query string) *httptest.ResponseRecorder {
		return do(r, httptest.NewRequest(http.MethodGet, "/config/7"+query, nil))
	}

	// A write runs: a read is turned away.
	done := make(chan int, 2)
	go func() { done <- do(r, httptest.NewRequest(http.MethodPut, "/config/7?block=1", nil)).Code }()
	<-entered
	locktest.CheckProblem(t, get(""), http.StatusConflict)
	finish <- struct{}{}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("write: %d, want 200", code)
	}
	released(t)

	// A read runs: a write waits, and a read that comes after it is turned
	// away; the write runs once the read returns.
	go func() { done <- get("?block=1").Code }()
	<-entered
	go func() { done <- do(r, httptest.NewRequest(http.MethodPut, "/config/7?block=1", nil)).Code }()
	queued(t, rdb, "config:7", 1)
	locktest.CheckProblem(t, get(""), http.StatusConflict)
	finish <- struct{}{}
	if what := <-entered; what != "write" {
		t.Fatalf("%s entered after the read, want the waiting write", what)
	}
	finish <- struct{}{}
	for range 2 {
		if code := <-done; code != http.StatusOK {
			t.Fatalf("status %d, want 200", code)
		}
	}
	if len(errs) != 0 {
		t.Errorf("c.Errors = %v, want none: contention is not an error", errs)
	}
	released(t)
	if w := get(""); w.Code != http.StatusOK {
		t.Fatalf("read after both returned: %d, want 200", w.Code)
	}
}

// An RLock inside a New of the same key (a route group writing) re-enters
// the write lock: the writer reads its own key.
func TestRLockInsideNewOfSameKeyReenters(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var errs []error
	r := gin.New()
	r.Use(errorsOf(&errs))
	g := r.Group("/", ginlock.New(locker, "config:{id}"))
	g.GET("/config/:id", ginlock.RLock(locker, "config:{id}"), func(c *gin.Context) {
		if !lock.Held(c.Request.Context(), "config:7") {
			t.Error("handler's context does not hold config:7")
		}
		c.Status(http.StatusOK)
	})
	if w := do(r, httptest.NewRequest(http.MethodGet, "/config/7", nil)); w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s, errors %v", w.Code, w.Body, errs)
	}
}

func TestRLockPanicsOnNilLocker(t *testing.T) {
	defer func() {
		err, ok := recover().(error)
		if want := `ginlock: RLock(nil RLocker, "config:{id}")`; !ok || err.Error() != want {
			t.Fatalf("panic value %v, want error %q", err, want)
		}
	}()
	ginlock.RLock((*lock.Client)(nil), "config:{id}")
}

// A New inside an RLock of the same key would wait for its own read
// hold: it is answered 500 at once, with an error wrapping
// lock.ErrInvalid in c.Errors.
func TestNewInsideRLockOfSameKeyIsMisconfigured(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var errs []error
	r := gin.New()
	r.Use(errorsOf(&errs))
	g := r.Group("/", ginlock.RLock(locker, "config:{id}"))
	g.PUT("/config/:id", ginlock.New(locker, "config:{id}", ginlock.WithWait(5*time.Second)), func(*gin.Context) { t.Error("handler ran") })
	start := time.Now()
	locktest.CheckProblem(t, do(r, httptest.NewRequest(http.MethodPut, "/config/7", nil)), http.StatusInternalServerError)
	if took := time.Since(start); took > time.Second {
		t.Errorf("answered after %v: it waited", took)
	}
	if len(errs) != 1 || !errors.Is(errs[0], lock.ErrInvalid) {
		t.Errorf("c.Errors = %v, want one error wrapping lock.ErrInvalid", errs)
	}
}
