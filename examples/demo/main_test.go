package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// short is a run small enough for the test suite: every invariant still
// meets duplicates and several cron ticks.
var short = config{duration: 3 * time.Second, replicas: 3, concurrency: 8, orders: 4, payTime: 5 * time.Millisecond, cron: cronRobfig}

// runPassing runs the demo with cfg, fails t unless every invariant held,
// and returns the report and its text.
func runPassing(t *testing.T, cfg config) (*report, string) {
	t.Helper()
	var out bytes.Buffer
	rep, err := run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.ok() {
		t.Fatalf("an invariant did not hold:\n%s", out.String())
	}
	return rep, out.String()
}

func TestDemoEmbedded(t *testing.T) {
	rep, out := runPassing(t, short)
	if rep.statuses[409] == 0 {
		t.Errorf("no request was turned away: the load never contended\n%s", out)
	}
	for _, want := range []string{"each paid exactly once  ok", "not answered 200 within 5 requests  ok", "answered \"already paid\"", "were replays", "Idempotency-Keys whose payment ran twice: 0  ok", "lost leases  0  ok", "terms on at once: 0  ok", "lock.hold", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestDemoGocron: the same run with the cron job on gocron v2 and
// gocronlock (-cron gocron): every tick still runs once.
func TestDemoGocron(t *testing.T) {
	cfg := short
	cfg.cron = cronGocron
	if _, out := runPassing(t, cfg); !strings.Contains(out, "0 of them more than once  ok") {
		t.Errorf("report lacks the cron line:\n%s", out)
	}
}

func TestDemoRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	cfg := short
	cfg.redisURL = "redis://" + srv.Addr
	if _, out := runPassing(t, cfg); !strings.Contains(out, "Redis at "+srv.Addr) {
		t.Errorf("report does not name the Redis:\n%s", out)
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, cfg := range []config{
		{duration: 0, replicas: 3, concurrency: 1, orders: 1, cron: cronRobfig},
		{duration: time.Second, replicas: 0, concurrency: 1, orders: 1, cron: cronRobfig},
		{duration: time.Second, replicas: 1, concurrency: 0, orders: 1, cron: cronRobfig},
		{duration: time.Second, replicas: 1, concurrency: 1, orders: 0, cron: cronRobfig},
		{duration: time.Second, replicas: 1, concurrency: 1, orders: 1, cron: "quartz"},
	} {
		if _, err := run(context.Background(), cfg, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%+v) accepted", cfg)
		}
	}
	for _, url := range []string{"ftp://nowhere", "redis://127.0.0.1:1/0"} {
		cfg := short
		cfg.redisURL = url
		if _, err := run(context.Background(), cfg, &bytes.Buffer{}); err == nil {
			t.Errorf("Redis URL %s was accepted", url)
		}
	}
}

// TestPayRetries: a client answered 409 or 503 asks again after the
// answer's Retry-After until a 200, and gives up after maxAttempts
// requests; every answer is counted.
func TestPayRetries(t *testing.T) {
	for _, tt := range []struct {
		name      string
		failures  int // answers before a 200
		status    int
		wantTries int
		want      int
	}{
		{"503 then 200", 2, http.StatusServiceUnavailable, 3, http.StatusOK},
		{"409 then 200", 1, http.StatusConflict, 2, http.StatusOK},
		{"503 for good", 100, http.StatusServiceUnavailable, maxAttempts, http.StatusServiceUnavailable},
		{"500 is not retried", 100, http.StatusInternalServerError, 1, http.StatusInternalServerError},
		{"no first answer, then 200", 1, 0, 2, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int64
			var mu sync.Mutex
			keys := map[string]bool{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys[r.Header.Get("Idempotency-Key")] = true
				mu.Unlock()
				if n.Add(1) <= int64(tt.failures) {
					if tt.status == 0 { // no answer within the first request's wait
						<-r.Context().Done()
						return
					}
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(tt.status)
					return
				}
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			counted := map[int]int{}
			p := pay(context.Background(), srv.Client(), []string{srv.URL}, "1-1", 50*time.Millisecond,
				func(a answer) { counted[a.status]++ })
			if p.attempts != tt.wantTries || p.status != tt.want {
				t.Errorf("payment %+v, want %d attempts ending in %d", p, tt.wantTries, tt.want)
			}
			if total := counted[tt.status] + counted[http.StatusOK]; total != tt.wantTries || int(n.Load()) != tt.wantTries {
				t.Errorf("%d answers counted (%v), %d requests served; want %d", total, counted, n.Load(), tt.wantTries)
			}
			if len(keys) != 1 || keys[""] {
				t.Errorf("Idempotency-Keys sent: %v; want one key on every request", keys)
			}
		})
	}
}
