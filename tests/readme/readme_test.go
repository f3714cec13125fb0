package readme_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/locktest"
)

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// normalize drops indentation and blank lines, so a block matches the body
// of the function that holds it.
func normalize(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func TestREADMEGoBlocksAreCompiled(t *testing.T) {
	snippets, err := os.ReadFile("snippets_test.go")
	if err != nil {
		t.Fatal(err)
	}
	compiled := normalize(string(snippets))
	for _, doc := range []string{"../../README.md", "../../docs/guide.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlock.FindAllStringSubmatch(string(text), -1)
		if len(blocks) == 0 {
			t.Fatalf("no Go block found in %s", doc)
		}
		for _, b := range blocks {
			if !strings.Contains(compiled, normalize(b[1])) {
				t.Errorf("this block of %s is not in snippets_test.go word for word:\n%s", doc, b[1])
			}
		}
	}
}

// The snippets do what the README says, against an embedded Redis.

func TestTheLockSnippet(t *testing.T) {
	mr := miniredis.RunT(t)
	held := false
	err := theLock(context.Background(), mr.Addr(), func(ctx context.Context) error {
		held = lock.Held(ctx, "orders:42")
		return nil
	})
	if err != nil || !held {
		t.Fatalf("err %v, held %v", err, held)
	}
	if len(mr.Keys()) != 1 { // only the fencing counter is left
		t.Fatalf("keys left: %v", mr.Keys())
	}
}

func TestPermitsSnippet(t *testing.T) {
	_, locker := embedded(t)
	held := false
	err := permits(context.Background(), locker, "acme", func(ctx context.Context) error {
		held = lock.Held(ctx, "reports:acme")
		return nil
	})
	if err != nil || !held {
		t.Fatalf("err %v, held %v", err, held)
	}
}

func TestGocronSnippet(t *testing.T) {
	if err := gocronJobs(locktest.New(t), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestGocronGuideSnippet(t *testing.T) {
	var used gocron.Scheduler
	if err := gocronGuide(locktest.New(t), func(gocronlock.Attempt) {}, func(s gocron.Scheduler) { used = s }); err != nil {
		t.Fatal(err)
	}
	if used == nil {
		t.Fatal("no scheduler made")
	}
	if err := used.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

func TestLeaderSnippet(t *testing.T) {
	locker := locktest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	led := false
	err := leaders(ctx, locker, func(ctx context.Context) error {
		led = lock.Held(ctx, leader.Key("reconciler"))
		cancel() // the replica stops: Run resigns and returns
		return nil
	})
	if !errors.Is(err, context.Canceled) || !led {
		t.Fatalf("err %v, led %v; want context.Canceled after leading", err, led)
	}
	if info, err := leader.Current(context.Background(), locker, "reconciler"); err != nil || info.Led {
		t.Fatalf("after the stop: %+v, %v; want nobody leading", info, err)
	}
}

func TestElectionSnippet(t *testing.T) {
	locker := locktest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	led := make(chan struct{})
	err := election(ctx, locker, func(ctx context.Context) error {
		close(led)
		<-ctx.Done()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-led:
	case <-time.After(5 * time.Second):
		t.Fatal("the replica did not lead within 5 s")
	}
	cancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := leader.Current(context.Background(), locker, "reconciler")
		if err == nil && !info.Led {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the stop: %+v, %v; want nobody leading", info, err)
		}
	}
}

func TestGinSnippet(t *testing.T) {
	_, locker := embedded(t)
	gin.SetMode(gin.TestMode)
	ok := func(c *gin.Context) { c.Status(http.StatusOK) }
	r := ginRoutes(locker, ok, ok)
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("pay: %d", w.Code)
	}
	w = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/exports", nil)
	req.Header.Set("X-Tenant", "acme")
	r.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("exports: %d", w.Code)
	}
	w = httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/reports", nil))
	if w.Code != http.StatusBadRequest { // no authenticated user
		t.Fatalf("reports without a user: %d, want 400", w.Code)
	}
}

// TestIdempotentSnippets: the README's net/http lock and its two
// Idempotency-Key routes pay once and replay the answer to a retry.
func TestIdempotentSnippets(t *testing.T) {
	rdb, locker := embedded(t)
	gin.SetMode(gin.TestMode)
	var paid atomic.Int32
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set("user", c.GetHeader("X-User")) })
	mux := httpRoutes(locker, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !lock.Held(r.Context(), "orders:"+r.PathValue("id")) {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	idempotentRoutes(r, mux, locker, rdb,
		func(c *gin.Context) { c.String(http.StatusCreated, "payment %d", paid.Add(1)) },
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, "payment %d", paid.Add(1))
		}))
	send := func(h http.Handler, path, key, user string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, nil)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		req.Header.Set("X-User", user)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := send(mux, "/orders/42/refund", "", ""); w.Code != http.StatusOK {
		t.Errorf("refund under httplock.New: %d, want 200", w.Code)
	}
	for _, tt := range []struct {
		name string
		h    http.Handler
		user string
	}{{"gin", r, "ada"}, {"net/http", mux, ""}} {
		first := send(tt.h, "/orders/42/pay", `"k-1"`, tt.user)
		retry := send(tt.h, "/orders/42/pay", `"k-1"`, tt.user)
		if first.Code != http.StatusCreated || retry.Code != http.StatusCreated ||
			retry.Body.String() != first.Body.String() || retry.Header().Get(httplock.ReplayedHeader) != "true" {
			t.Errorf("%s: first %d %q, retry %d %q (replayed %q); want the first answer replayed",
				tt.name, first.Code, first.Body, retry.Code, retry.Body, retry.Header().Get(httplock.ReplayedHeader))
		}
	}
	if w := send(r, "/orders/42/pay", "", "ada"); w.Code != http.StatusBadRequest {
		t.Errorf("gin route without a key: %d, want 400 (WithKeyRequired)", w.Code)
	}
	if w := send(r, "/orders/42/pay", `"k-1"`, ""); w.Code != http.StatusBadRequest {
		t.Errorf("gin route without a user: %d, want 400 (empty scope)", w.Code)
	}
	if n := paid.Load(); n != 2 {
		t.Errorf("%d payments, want 2 (one per route)", n)
	}
}

func TestCronTracingAndScaleSnippets(t *testing.T) {
	rdb, locker := embedded(t)
	if err := cronJobs(locker, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := tracing(rdb); err != nil {
		t.Fatal(err)
	}
	if err := scale(nil, rdb, rdb, rdb); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("scale with one node three times = %v, want ErrInvalid", err)
	}
}

// embedded returns a Redis client and a lock Client on an embedded Redis,
// both closed when the test ends.
func embedded(t *testing.T) (*redis.Client, *lock.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	locker, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locker.Close() })
	return rdb, locker
}
