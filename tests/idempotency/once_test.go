package idempotency_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Timing of the replicas in TestIdempotencyOncePerKey: Redis's stop is
// longer than the acquisition bound (1 s by default), so that requests
// meet it as 503s, and longer than the store timeout
// (httplock.DefaultStoreTimeout, 2 s), so that stores of answers sent
// meanwhile time out, and shorter than the lease, so that their runs keep
// their locks until Redis takes the answers.
const (
	onceLease = 30 * time.Second
	onceStall = 3 * time.Second
)

// TestIdempotencyOncePerKey pays 200 orders through 3 replica processes
// of a payment service on one Redis: each order by 3 concurrent clients
// with the same key and body, one to each replica; slow handlers on a
// fifth of the orders, clients that time out while the handler runs on
// a tenth. Every order is paid exactly once (the bank); each client
// retrying a 409 or a timeout ends with the one answer, replayed byte
// for byte; a retry after that to every replica is a replay; the key
// with another body or path gets 422; 409s and 503s carry Retry-After
// and problem+json; no other 5xx. Redis keeps one answer per order,
// with a TTL, and no run lock; the replicas' logs carry no key or body.
// Incidents are rows: Redis stopped mid-run answers the requests sent
// meanwhile within the acquisition bound (1 s + 100 ms), 503s among
// them, and changes none of the rest: an answer whose store timed out
// (outcome "store-failed") is sent, and stored once Redis resumes.
func TestIdempotencyOncePerKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stall time.Duration // Redis SIGSTOPped for this long once a third of the orders are paid
		// contextTimeout: the replicas' go-redis clients end calls at
		// their context's deadline themselves (ContextTimeoutEnabled).
		contextTimeout bool
	}{
		{name: "redis up"},
		// A default go-redis client ends a call on a stalled Redis only
		// at its ReadTimeout (3 s): the middleware bounds its own calls.
		{name: "redis stopped mid-run", stall: onceStall},
		{name: "redis stopped mid-run, go-redis ContextTimeoutEnabled", stall: onceStall, contextTimeout: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, fleetConfig{lease: onceLease, contextTimeout: tc.contextTimeout})
			var stall window
			var incident func()
			if tc.stall > 0 {
				incident = func() {
					f.redis.Pause()
					stall.from = time.Now()
					time.Sleep(tc.stall)
					stall.to = time.Now()
					f.redis.Resume()
				}
			}
			start := time.Now()
			answers := f.runWorkload(t, incident)
			elapsed := time.Since(start)
			checkAnswers(t, f.bank, answers, stall)
			checkRedisKeys(t, f)
			checkLogs(t, f, answers)
			outcomes := f.outcomes()
			checkStored(t, f, outcomes, tc.stall > 0)
			if f.bank.payments() != orders {
				t.Errorf("bank made %d payments for %d orders", f.bank.payments(), orders)
			}
			conflictsAfterTimeout := count(answers, func(a answer) bool {
				return a.phase == phaseAfterTO && a.status == http.StatusConflict
			})
			unavailable := count(answers, func(a answer) bool { return a.status == http.StatusServiceUnavailable })
			switch {
			case tc.stall == 0 && conflictsAfterTimeout == 0:
				t.Errorf("no retry after a client's timeout met the handler still running (409)")
			case tc.stall > 0 && unavailable == 0:
				t.Errorf("no 503 while Redis was stopped %v", tc.stall)
			}
			t.Logf("%d requests in %v; bank payments %d; 409 right after a timeout %d; 503 %d (Redis stopped %v)",
				len(answers), elapsed.Round(time.Millisecond), f.bank.payments(), conflictsAfterTimeout, unavailable,
				stall.to.Sub(stall.from).Round(time.Millisecond))
			if !stall.zero() {
				t.Logf("requests sent while Redis was stopped: %s", checkStallBound(t, answers, stall))
			}
			t.Logf("answers by phase and status: %s", tally(answers))
			t.Logf("replicas' outcomes: %v", outcomes)
			cmds, calls := f.commands()
			t.Logf("Redis calls: %d, %.2f a request: %s", calls, float64(calls)/float64(len(answers)), cmds)
		})
	}
}

// checkStored checks that the handler's answer of every order was
// stored: each run's outcome is "ran", or, when Redis was stopped
// (stalled), "store-failed", each of whose stores a later attempt made
// (one log record each), and none "not-stored".
func checkStored(t *testing.T, f *fleet, outcomes map[string]int, stalled bool) {
	t.Helper()
	failed := outcomes["store-failed"]
	if outcomes["ran"]+failed != orders || outcomes["not-stored"] != 0 || (!stalled && failed != 0) {
		t.Errorf("replicas' outcomes %v: want ran and store-failed %d in all, store-failed only while Redis stopped, no not-stored",
			outcomes, orders)
	}
	// A retry can be replayed the answer of an attempt Redis ran as it
	// resumed before that attempt's caller heard of it (a store timeout
	// later at most): the record comes then.
	later := 0
	locktest.Eventually(t, httplock.DefaultStoreTimeout+locktest.Bound(time.Second), "a record of each later store", func() bool {
		later = strings.Count(f.logs(), "idempotent answer stored after retrying")
		return later >= failed
	})
	if later != failed {
		t.Errorf("%d answers stored after retrying, want one for each of the %d store-failed", later, failed)
	}
}
