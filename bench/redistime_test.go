package main

import (
	"math"
	"testing"
)

// INFO commandstats over 10 pairs of three libraries' kinds: a script
// library (EVALSHA running SET, GET and DEL), a SET NX library releasing by
// script (GET and DEL inside), and one sending GET itself and from a
// script, all on one Redis, plus a client's handshake.
var tenPairs = redisStats{
	calls: map[string]int64{"evalsha": 20, "set": 20, "get": 30, "del": 20, "client|setinfo": 2},
	usec:  map[string]int64{"evalsha": 400, "set": 60, "get": 60, "del": 40, "client|setinfo": 4},
}

func TestSentTimeCountsScriptsOnce(t *testing.T) {
	// The clients sent 20 EVALSHA, 10 SET, 10 GET and CLIENT SETINFO twice:
	// the other 10 SET, 20 GET and every DEL ran inside the scripts, whose
	// time EVALSHA's 400 µs already includes.
	sent := map[string]int64{"evalsha": 20, "set": 10, "get": 10, "client": 2, "ping": 1}
	rt := tenPairs.sentTime(sent)
	if want := 400.0 + 30 + 20 + 4; math.Abs(rt.usec-want) > 1e-9 {
		t.Errorf("usec = %v, want %v (evalsha 400 + half of set's + a third of get's + client's 4)", rt.usec, want)
	}
	if got, want := rt.perCall(10, "pair"),
		"evalsha 20.0 µs × 2/pair, set 3.0 µs × 1/pair (scripts run it too), get 2.0 µs × 1/pair (scripts run it too), client 2.0 µs × 0.2/pair"; got != want {
		t.Errorf("perCall =\n%q, want\n%q", got, want)
	}
}

func TestSentTimeLeavesOutWhatOnlyScriptsRun(t *testing.T) {
	rt := tenPairs.sentTime(map[string]int64{"evalsha": 20})
	if rt.usec != 400 || len(rt.kinds) != 1 {
		t.Errorf("sentTime = %+v, want evalsha's 400 µs alone", rt)
	}
	// More sent than Redis counted (a command in flight as INFO was read)
	// counts every call Redis counted, no more.
	if rt := tenPairs.sentTime(map[string]int64{"set": 25}); rt.usec != 60 || rt.kinds[0].calls != 20 {
		t.Errorf("sentTime = %+v, want set's 60 µs over 20 calls", rt)
	}
	if rt := tenPairs.sentTime(nil); rt.usec != 0 || rt.perCall(1, "pair") != "" {
		t.Errorf("nothing sent: %+v", rt)
	}
}
