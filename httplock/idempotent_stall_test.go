package httplock

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestIdempotentStallLongerThanStoreTimeoutRunsOnce stops Redis
// (SIGSTOP) while the handler runs, for longer than the store timeout
// and shorter than the run lock's lease: the client gets the handler's
// answer within the store timeout, a duplicate sent while Redis is
// stopped is turned away (409 or 503), and once Redis resumes a retry
// gets the answer replayed: the handler never runs twice. The logs say
// that the first store failed and a later attempt landed, without the
// key or the body. Rows: the store script is not in Redis's script cache
// yet (the store Redis got before it stopped ends in NOSCRIPT, and
// go-redis sends no EVAL for a call its caller gave up on), or it is
// (that store runs once Redis resumes; a later attempt finds it).
func TestIdempotentStallLongerThanStoreTimeoutRunsOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cached bool
	}{
		{name: "script not cached"},
		{name: "script cached", cached: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newIdemEnv(t)
			if tc.cached {
				if err := storeScript.Load(context.Background(), e.rdb).Err(); err != nil {
					t.Fatal(err)
				}
			}
			s, logs, runs := stallRun(t, e, locktest.Bound(10*time.Second))
			e.srv.Resume()
			var retry *http.Response
			var body string
			var err error
			locktest.Eventually(t, locktest.Bound(5*time.Second), "a retry not turned away", func() bool {
				retry, body, err = post(context.Background(), s, "secret-key", "secret-body")
				return err == nil && retry.StatusCode != http.StatusConflict && retry.StatusCode != http.StatusServiceUnavailable
			})
			if n := runs.Load(); n != 1 || retry.StatusCode != http.StatusOK || body != "paid" || retry.Header.Get(ReplayedHeader) != "true" {
				t.Fatalf("retry after Redis resumed: %d %q replayed=%q after %d runs, want the answer replayed after 1 run",
					retry.StatusCode, body, retry.Header.Get(ReplayedHeader), n)
			}
			// The retry can meet the answer of an attempt Redis ran as it
			// resumed before that attempt's caller heard of it: the record
			// of the store comes when the retries end.
			locktest.Eventually(t, locktest.Bound(2*time.Second), "the retries to end", func() bool {
				return retrying.Load() == 0
			})
			checkStallLogs(t, logs.String(), "storing an idempotent answer failed", "idempotent answer stored after retrying")
		})
	}
}

// TestIdempotentStallLongerThanLeaseEndsRetries stops Redis for longer
// than the run lock's lease: the hold ends at the lease's validity, and
// with it the store's retries, while Redis is still stopped; a retry
// once it resumes runs the handler anew (the answer was not stored) or
// replays the answer of an attempt Redis ran late, never anything else.
func TestIdempotentStallLongerThanLeaseEndsRetries(t *testing.T) {
	e := newIdemEnv(t)
	lease := locktest.Bound(time.Second)
	s, logs, runs := stallRun(t, e, lease)
	locktest.Eventually(t, lease+locktest.Bound(time.Second), "the retries to end", func() bool {
		return retrying.Load() == 0
	})
	checkStallLogs(t, logs.String(), "the run lock's hold ended before Redis took the answer")
	e.srv.Resume()
	resp, body, err := post(context.Background(), s, "secret-key", "secret-body")
	if err != nil || resp.StatusCode != http.StatusOK || body != "paid" {
		t.Fatalf("retry after Redis resumed: %v %v %q, want the handler's answer", resp, err, body)
	}
	if replayed := resp.Header.Get(ReplayedHeader) == "true"; replayed != (runs.Load() == 1) {
		t.Fatalf("retry replayed=%v after %d runs", replayed, runs.Load())
	}
}

// TestIdempotentCloseEndsRetries closes the lock Client while an answer's
// store is being retried on a stopped Redis: the retries end within
// holdCheck of Close returning.
func TestIdempotentCloseEndsRetries(t *testing.T) {
	e := newIdemEnv(t)
	stallRun(t, e, locktest.Bound(10*time.Second))
	if retrying.Load() != 1 {
		t.Fatalf("%d stores being retried, want 1", retrying.Load())
	}
	_ = e.locker.Close()
	locktest.Eventually(t, locktest.Bound(holdCheck+50*time.Millisecond), "the retries to end", func() bool {
		return retrying.Load() == 0
	})
}

// stallRun serves the test's handler with a store timeout of 300 ms and
// a run lock of lease, runs a request, stops Redis while its handler
// runs, and checks that the client gets the handler's answer within the
// store timeout ("store-failed") and that a duplicate is turned away. It
// returns with Redis stopped 1.5 s, at least, and resumed at the test's
// end, with the server, its log and the handler's runs.
func stallRun(t *testing.T, e *idemEnv, lease time.Duration) (*httptest.Server, *locktest.SyncBuffer, *atomic.Int64) {
	t.Helper()
	logs := new(locktest.SyncBuffer)
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const store, stall = 300 * time.Millisecond, 1500 * time.Millisecond
	g := newGate()
	s := replica(t, e, e.rdb, g.serve, WithStoreTimeout(store), WithIdempotencyAcquireTimeout(300*time.Millisecond),
		WithIdempotencyLockOptions(lock.WithLease(lease)), WithLogger(logger))
	first, stopped := e.stallFirstRun(t, s, g, "secret-key", "secret-body")
	select {
	case a := <-first:
		a.paid(t, "the first request")
	case <-time.After(locktest.Bound(store + 500*time.Millisecond)):
		t.Fatal("the handler's answer waited for Redis past the store timeout")
	}
	e.checkOutcomes(t, "store-failed")
	resp, body, err := post(context.Background(), s, "secret-key", "secret-body")
	if err != nil || (resp.StatusCode != http.StatusConflict && resp.StatusCode != http.StatusServiceUnavailable) {
		t.Fatalf("a duplicate while Redis is stopped: %v %v %q, want 409 or 503", resp, err, body)
	}
	e.took()
	time.Sleep(time.Until(stopped.Add(stall))) // the incident: Redis stopped this long
	return s, logs, &g.runs
}

// checkStallLogs fails t unless logs hold every one of want, and when
// they hold the key, the body or the answer.
func checkStallLogs(t *testing.T, logs string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(logs, w) {
			t.Errorf("the logs do not say %q:\n%s", w, logs)
		}
	}
	for _, secret := range []string{"secret-key", "secret-body", "paid"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the logs hold %q:\n%s", secret, logs)
		}
	}
}
