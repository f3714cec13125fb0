package ginlock_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// A stalled Redis (SIGSTOPped) gets a Limit's request a 503 with
// Retry-After within the acquisition bound, as New's, and the error
// passed to c.Error names the template, not the tenant's key.
func TestLimitAnswers503OnStalledRedis(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	var errs []error
	for _, tc := range []struct {
		name  string
		opts  []ginlock.Option
		bound time.Duration
	}{
		{"default", nil, ginlock.DefaultAcquireTimeout},
		{"WithAcquireTimeout", []ginlock.Option{ginlock.WithAcquireTimeout(300 * time.Millisecond)}, 300 * time.Millisecond},
		{"WithWait", []ginlock.Option{ginlock.WithWait(500 * time.Millisecond)}, 500 * time.Millisecond},
	} {
		errs = errs[:0]
		r := reportRoute(locker, 3, &errs, func(*gin.Context) { t.Error("handler ran") }, tc.opts...)
		if tc.name == "default" { // connection and scripts ready, then stall
			if w := report(reportRoute(locker, 3, &errs, func(*gin.Context) {}), "warm"); w.Code != http.StatusOK {
				t.Fatalf("warm-up: %d", w.Code)
			}
			released(t)
			srv.Pause()
			t.Cleanup(srv.Resume)
		}
		start := time.Now()
		w := report(r, "acme")
		took := time.Since(start)
		t.Logf("%s: %d after %v", tc.name, w.Code, took)
		locktest.CheckProblem(t, w, http.StatusServiceUnavailable)
		if took > tc.bound+150*time.Millisecond {
			t.Errorf("%s: answered after %v, want within %v", tc.name, took, tc.bound)
		}
		if got := w.Header().Get("Retry-After"); got != "1" {
			t.Errorf("%s: Retry-After = %q, want 1", tc.name, got)
		}
		if len(errs) != 1 || strings.Contains(errs[0].Error(), "acme") || !strings.Contains(errs[0].Error(), reportsKey) {
			t.Errorf("%s: c.Errors = %v, want one error naming the template, not the key", tc.name, errs)
		}
	}
}

// A limit below 1 is refused when the route is registered, as an invalid
// template is: Limit panics with an error naming the template and the
// limit. So does a nil Limiter.
func TestLimitPanicsOnBadLimit(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	for _, tt := range []struct {
		name    string
		limiter ginlock.Limiter
		limit   int
		want    string
	}{
		{"zero", locker, 0, `ginlock: Limit("reports:{header.X-Tenant}", 0): the limit must be at least 1`},
		{"negative", locker, -2, `ginlock: Limit("reports:{header.X-Tenant}", -2): the limit must be at least 1`},
		{"nil limiter", nil, 3, `ginlock: Limit(nil Limiter, "reports:{header.X-Tenant}")`},
		{"nil client", (*lock.Client)(nil), 3, `ginlock: Limit(nil Limiter, "reports:{header.X-Tenant}")`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				err, ok := recover().(error)
				if !ok || err.Error() != tt.want {
					t.Fatalf("panic value %v, want error %q", err, tt.want)
				}
			}()
			ginlock.Limit(tt.limiter, reportsKey, tt.limit)
		})
	}
	defer func() {
		if err, ok := recover().(error); !ok || !strings.Contains(err.Error(), `template "reports:{header.X-Tenant"`) {
			t.Fatalf("bad template: panic value %v, want an error naming the template", err)
		}
	}()
	ginlock.Limit(locker, "reports:{header.X-Tenant", 3)
}

// A Limit on a route group and another of the same key and limit on its
// route take one permit, not two: with a limit of 1 the request runs.
func TestLimitReentersNestedLimitOfOneKey(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var errs []error
	r := gin.New()
	r.Use(errorsOf(&errs))
	g := r.Group("/", ginlock.Limit(locker, reportsKey, 1))
	g.POST("/reports", ginlock.Limit(locker, reportsKey, 1), func(c *gin.Context) {
		if !lock.Held(c.Request.Context(), "reports:acme") {
			t.Error("handler's context does not hold the permit")
		}
		c.Status(http.StatusOK)
	})
	if w := report(r, "acme"); w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s, errors %v", w.Code, w.Body, errs)
	}
}

// A Limit whose limit differs from that of the requests holding the key
// (a deploy that changed it, replica by replica) is a misconfiguration:
// 500, and an error wrapping lock.ErrInvalid in c.Errors; the holders
// keep their permits.
func TestLimitWithAnotherLimitThanHoldersIsMisconfigured(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	hctx, unlock, err := locker.Acquire(context.Background(), "reports:acme", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	var errs []error
	r := reportRoute(locker, 5, &errs, func(*gin.Context) { t.Error("handler ran") })
	locktest.CheckProblem(t, report(r, "acme"), http.StatusInternalServerError)
	if len(errs) != 1 || !errors.Is(errs[0], lock.ErrInvalid) {
		t.Errorf("c.Errors = %v, want one error wrapping lock.ErrInvalid", errs)
	}
	if !lock.Held(hctx, "reports:acme") {
		t.Error("the holder lost its permit")
	}
}

// A permit is held, and renewed, while the handler runs, also after the
// client went away: the handler's context says so with
// context.Canceled, a request meanwhile gets 429, and the permit comes
// back once the handler returns.
func TestLimitHoldsPermitPastClientDisconnect(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	const lease = 600 * time.Millisecond // renewed every 200 ms
	entered, retried, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	cause, heldAfter := make(chan error, 1), make(chan bool, 1)
	var errs []error
	r := reportRoute(locker, 1, &errs, func(c *gin.Context) {
		if c.Query("retry") != "" {
			c.Status(http.StatusOK)
			return
		}
		defer close(done)
		ctx := c.Request.Context()
		close(entered)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		<-retried
		heldAfter <- lock.Held(ctx, ginlock.Key(c))
	}, ginlock.WithLockOptions(lock.WithLease(lease)))
	hs := httptest.NewServer(r)
	defer hs.Close()
	post := func(ctx context.Context, query string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/reports"+query, nil)
		req.Header.Set("X-Tenant", "acme")
		return hs.Client().Do(req)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel() // the client goes away
	}()
	if resp, err := post(ctx, ""); err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded, want it cancelled")
	}
	if got := <-cause; got != context.Canceled {
		t.Errorf("handler's context cause after disconnect = %v, want context.Canceled", got)
	}
	time.Sleep(2 * lease) // past the lease: still held only if renewed
	resp, err := post(context.Background(), "?retry=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	close(retried)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("request while the first handler runs: %d, want 429", resp.StatusCode)
	}
	if !<-heldAfter {
		t.Error("lock.Held false in the handler after the client went away")
	}
	<-done
	released(t)
	resp, err = post(context.Background(), "?retry=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("request after the handler returned: %d, want 200", resp.StatusCode)
	}
}
