package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// judge runs checks and returns their verdicts.
func judge(checks []check) []verdict {
	var got []verdict
	for _, c := range checks {
		got = append(got, c())
	}
	return got
}

type wantVerdict struct {
	met      bool
	measured string
}

func expectVerdicts(t *testing.T, got []verdict, want []wantVerdict) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d verdicts, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if !got[i].known || got[i].met != w.met || got[i].measured != w.measured {
			t.Errorf("%s: got %+v, want met=%v measured %q", got[i].target, got[i], w.met, w.measured)
		}
	}
}

func TestContendedChecksUseTheBestPeer(t *testing.T) {
	tb := newTable("t", "", column{colAcqPerSec, "", 0}, column{colWait99, "", 0}, column{colWaitMax, "", 0}, column{colJain, "", 0}, column{colRedisUsec, "", 1})
	tb.add("lockkit", figures{colAcqPerSec: 96, colWait99: 19, colWaitMax: 50, colJain: 0.97, colRedisUsec: 40})
	tb.add("redsync", figures{colAcqPerSec: 80, colWait99: 300, colWaitMax: 200, colRedisUsec: 5})
	tb.add("redislock", figures{colAcqPerSec: 100, colWait99: 100, colWaitMax: 1500, colRedisUsec: 5})
	tb.add("floor", figures{colAcqPerSec: 1000, colWait99: 1, colWaitMax: 1, colRedisUsec: 20}) // not a peer
	got := judge(contendedChecks(tb, 8, time.Millisecond, false))
	expectVerdicts(t, got, []wantVerdict{
		{true, "lockkit 96.00, best peer 100.00: 0.960×"}, // acq/s: higher is better
		{false, "lockkit 0.970"},
		{false, "lockkit 50.00, best peer 200.00: 0.250×"}, // wait max: lower is better
		{true, "lockkit 19.00, best peer 100.00: 0.190×"},  // p99: lower is better
		{false, "lockkit 40.00, floor 20.00: 2.000×"},      // Redis usec against the floor's
	})
	if want := "3. W = 8, hold 1 ms, one shared client: acq/s ≥ 0.95× the best peer's"; got[0].target != want {
		t.Errorf("target %q, want %q", got[0].target, want)
	}
}

func TestContendedChecksCoverEveryCase(t *testing.T) {
	tb := newTable("t", "", column{colAcqPerSec, "", 0})
	for _, tc := range []struct {
		hold      time.Duration
		perWorker bool
		n         int
		where     string
	}{
		{0, false, 4, "3. W = 32, hold 0 ms, one shared client:"},
		{0, true, 4, "3. W = 32, hold 0 ms, a client per worker:"},
		{time.Millisecond, true, 5, "3. W = 32, hold 1 ms, a client per worker:"}, // and the earlier issue's p99
	} {
		got := judge(contendedChecks(tb, 32, tc.hold, tc.perWorker))
		if len(got) != tc.n {
			t.Errorf("hold %v, per worker %v: %d checks, want %d", tc.hold, tc.perWorker, len(got), tc.n)
		}
		for _, v := range got {
			if !strings.HasPrefix(v.target, tc.where) {
				t.Errorf("target %q, want it to start with %q", v.target, tc.where)
			}
		}
		if !strings.Contains(got[2].target, "wait max ≤ 0.2×") {
			t.Errorf("third check %q, want the worst wait", got[2].target)
		}
	}
}

func TestUncontendedChecks(t *testing.T) {
	tb := newTable("t", "", pairColumns(column{colRedisUsec, "", 1})...)
	tb.add("lockkit", figures{colPairsPerSec: 5000, colRoundTrips: 2, colAllocs: 40, colRedisUsec: 7})
	tb.add("redsync", figures{colPairsPerSec: 5200, colRoundTrips: 2, colAllocs: 40, colRedisUsec: 4})
	tb.add("redislock", figures{colPairsPerSec: 4800, colRoundTrips: 2, colAllocs: 34, colRedisUsec: 6})
	tb.add("floor", figures{colPairsPerSec: 5500, colRoundTrips: 2, colAllocs: 21, colRedisUsec: 3})
	expectVerdicts(t, judge(uncontendedChecks(tb)), []wantVerdict{
		{true, "lockkit 5,000.00, floor 5,500.00: 0.909×"},
		{false, "lockkit 5,000.00, best peer 5,200.00: 0.962×"}, // the higher peer, redsync
		{true, "lockkit 2.000"},
		{false, "lockkit 40.0"},                        // > 30 allocations
		{true, "lockkit 7.00, redislock 6.00: 1.167×"}, // against redislock's, not the lower peer's
	})
	tb.add("lockkit", figures{colPairsPerSec: 5000, colRoundTrips: 3, colAllocs: 41})
	tb.add("lockkit", figures{colPairsPerSec: 5000, colRoundTrips: 3, colAllocs: 41})
	if got := judge(uncontendedChecks(tb)); got[2].met || got[3].met {
		t.Errorf("medians of 3 round trips and 41 allocations judged met: %+v", got)
	}
}

func TestRatioJustUnderTheBoundShowsAsUnder(t *testing.T) {
	tb := newTable("t", "", column{colAcqPerSec, "", 0})
	tb.add("lockkit", figures{colAcqPerSec: 6630})
	tb.add("redislock", figures{colAcqPerSec: 6990})
	expectVerdicts(t, judge(contendedChecks(tb, 32, 0, false))[:1], []wantVerdict{
		{false, "lockkit 6,630.00, best peer 6,990.00: 0.948×"}, // not "0.95×: missed"
	})
}

func TestManyKeysCheck(t *testing.T) {
	tb := newTable("t", "", column{colAcqPerSec, "", 0}, column{colRedisUsec, "", 1})
	tb.add("lockkit", figures{colAcqPerSec: 17_000, colRedisUsec: 6.5})
	tb.add("redislock", figures{colAcqPerSec: 30_000, colRedisUsec: 1}) // peers do not count
	tb.add("floor", figures{colAcqPerSec: 20_000, colRedisUsec: 5})
	expectVerdicts(t, judge(manyKeysChecks(tb)), []wantVerdict{
		{false, "lockkit 17,000.00, floor 20,000.00: 0.850×"},
		{true, "lockkit 6.50, floor 5.00: 1.300×"}, // at the bound
	})
}

func TestMemoryChecks(t *testing.T) {
	for _, tc := range []struct {
		afterLease, noTTL float64
		met               [2]bool
	}{
		{0.4, 0, [2]bool{true, true}},
		{-1, 0, [2]bool{true, true}}, // below the start by 1 MiB is within it too
		{161.5, 1_000_000, [2]bool{false, false}},
		{1.01, 1, [2]bool{false, false}},
	} {
		tb := newTable("t", "", column{colMemAfterLease, "", 2}, column{colMemNoTTL, "", 0})
		tb.add("lockkit", figures{colMemAfterLease: tc.afterLease, colMemNoTTL: tc.noTTL})
		tb.add("floor", figures{colMemAfterLease: 0, colMemNoTTL: 0})
		got := judge(memoryChecks(tb, 1_000_000))
		for i, v := range got {
			if !v.known || v.met != tc.met[i] {
				t.Errorf("after lease %v MiB, %v keys without TTL: %q met=%v known=%v, want met=%v",
					tc.afterLease, tc.noTTL, v.target, v.met, v.known, tc.met[i])
			}
		}
		if want := fmt.Sprintf("lockkit %s", formatNum(tc.afterLease, 2)); got[0].measured != want {
			t.Errorf("measured %q, want %q", got[0].measured, want)
		}
	}
}

func TestMemoryCheckNamesTheKeys(t *testing.T) {
	got := judge(memoryChecks(newTable("t", ""), 2000))
	if !strings.HasPrefix(got[0].target, "7. 2,000 keys locked and released:") {
		t.Errorf("target %q does not name the keys", got[0].target)
	}
	if got[0].known || got[1].known {
		t.Errorf("verdicts without figures: %+v", got)
	}
}

func TestVerdictsWithoutFigures(t *testing.T) {
	tb := newTable("t", "", column{colPairsPerSec, "", 0}, column{colRoundTrips, "", 2})
	tb.notApplicable("floor")
	var b strings.Builder
	writeVerdicts(&b, config{}, uncontendedChecks(tb))
	if strings.Contains(b.String(), "met") || strings.Count(b.String(), "not measured") != 5 {
		t.Fatalf("verdicts without figures:\n%s", b.String())
	}
}
