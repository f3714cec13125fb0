package idempotency_test

import (
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// Timing of TestIdempotencyGoneClientNeitherUnavailableNorConflict: a
// Redis call held back for less than the acquisition bound (1 s), and a
// client that gives up before it comes back.
const (
	goneHold    = 500 * time.Millisecond
	goneTimeout = 100 * time.Millisecond
)

// TestIdempotencyGoneClientNeitherUnavailableNorConflict sends a request
// to replica 0 whose client gives up after 100 ms while a proxy holds
// back one Redis call of the middleware by 500 ms: within the
// acquisition bound, with the key free. The replica must count neither
// "unavailable" (Redis failed or did not answer in time: telemetry
// reports the store failing) nor "conflict" (a duplicate ran: none did)
// for it, but "client-gone". The same request retried at replica 1
// then runs the handler, once. Rows are the call held back.
func TestIdempotencyGoneClientNeitherUnavailableNorConflict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hold string // a part of the held call's keys
	}{
		// The client's cancellation ends the held call: the middleware
		// must not read it as Redis failing (after the answer's read) or
		// as a held key (after TryLock); it counts "client-gone".
		{name: "the read of the stored answer", hold: answerPrefix},
		{name: "the run lock's acquisition", hold: "{" + runPrefix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, fleetConfig{lease: onceLease, proxied: true})
			seen := f.proxy.HoldBackFirst(tc.hold, goneHold)
			r := request{order: 1, replica: 0, key: "gone-" + randomHex(4), amount: 101, timeout: goneTimeout}
			if a := f.pay(r, phaseFirst); !timedOut(a) {
				t.Fatalf("%v: want the client's timeout %v while the call is held back", a, goneTimeout)
			}
			locktest.Within(t, seen, locktest.Bound(time.Second), "the held call reached the proxy")
			locktest.Eventually(t, goneHold+locktest.Bound(time.Second), "the held call went on", func() bool {
				return !f.proxy.HeldBackUntil().IsZero()
			})
			wentOn := f.proxy.HeldBackUntil()
			// The gone client's request ended at its cancellation, long
			// before the held call went on; its retry comes after that.
			r.replica, r.timeout = 1, 0
			j := &journal{}
			f.settle(r, j.add(f.pay(r, phaseSettle)), phaseSettle, j)
			answers := j.all()
			last := answers[len(answers)-1]
			if !last.fresh() {
				t.Errorf("%v: want a run of the handler", last)
			}
			if runs, paid := f.bank.ledger("1"); len(runs) != 1 || len(paid) != 1 {
				t.Errorf("bank: runs %v, payments %+v; want one each", runs, paid)
			}
			n := f.outcomesOf(0)
			if n["unavailable"] != 0 || n["conflict"] != 0 || n["client-gone"] != 1 {
				t.Errorf("replica %s counted %v for a client gone while Redis answered within the bound and the key was free",
					replicaName(0), n)
			}
			t.Logf("outcomes of %s: %v; retry run sent %v after the held call went on (%d retries)",
				replicaName(0), n, last.sent.Sub(wentOn).Round(time.Millisecond), len(answers)-1)
		})
	}
}
