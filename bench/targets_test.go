package main

import (
	"strings"
	"testing"
)

func TestContendedChecksUseTheBetterPeer(t *testing.T) {
	tb := newTable("t", "", column{colAcqPerSec, "", 0}, column{colWait99, "", 0}, column{colJain, "", 0})
	tb.add("lockkit", figures{colAcqPerSec: 96, colWait99: 19, colJain: 0.97})
	tb.add("redsync", figures{colAcqPerSec: 80, colWait99: 300})
	tb.add("redislock", figures{colAcqPerSec: 100, colWait99: 100})
	tb.add("floor", figures{colAcqPerSec: 1000, colWait99: 1}) // not a peer
	var got []verdict
	for _, c := range contendedChecks(tb, 8, false) {
		got = append(got, c())
	}
	want := []struct {
		met      bool
		measured string
	}{
		{true, "lockkit 19.00, better peer 100.00: 0.19×"}, // p99: lower is better
		{true, "lockkit 96.00, better peer 100.00: 0.96×"}, // acq/s: higher is better
		{false, "lockkit 0.970"},
	}
	for i, w := range want {
		if !got[i].known || got[i].met != w.met || got[i].measured != w.measured {
			t.Errorf("%s: got %+v, want met=%v measured %q", got[i].target, got[i], w.met, w.measured)
		}
	}
}

func TestVerdictsWithoutFigures(t *testing.T) {
	tb := newTable("t", "", column{colPairsPerSec, "", 0}, column{colRoundTrips, "", 2})
	tb.notApplicable("floor")
	var b strings.Builder
	writeVerdicts(&b, config{}, uncontendedChecks(tb))
	if strings.Contains(b.String(), "met") || strings.Count(b.String(), "not measured") != 3 {
		t.Fatalf("verdicts without figures:\n%s", b.String())
	}
}
