package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// A verdict is one target of the issue, judged on the medians.
type verdict struct {
	target   string
	measured string
	met      bool
	known    bool // false when a figure is missing
}

type check func() verdict

// peers are the libraries lockkit is compared with; the floor is not one.
var peers = []string{"redsync", "redislock"}

// ratioCheck compares lockkit's median of key with ref's, scaled by k:
// lockkit ≥ k·ref when higher is better, ≤ k·ref otherwise.
func ratioCheck(t *table, what, key string, k float64, ref string, refValue func() (float64, bool), higher bool) check {
	return func() verdict {
		v := verdict{target: what}
		mine, ok1 := t.median("lockkit", key)
		theirs, ok2 := refValue()
		if !ok1 || !ok2 || theirs == 0 {
			return v
		}
		v.known = true
		v.measured = fmt.Sprintf("lockkit %s, %s %s: %.2f×", formatNum(mine, 2), ref, formatNum(theirs, 2), mine/theirs)
		if higher {
			v.met = mine >= k*theirs
		} else {
			v.met = mine <= k*theirs
		}
		return v
	}
}

// limitCheck compares lockkit's median of key with a bound.
func limitCheck(t *table, what, key string, ok func(float64) bool) check {
	return func() verdict {
		v := verdict{target: what}
		if mine, found := t.median("lockkit", key); found {
			v.measured, v.met, v.known = "lockkit "+formatNum(mine, 3), ok(mine), true
		}
		return v
	}
}

func of(t *table, lib, key string) func() (float64, bool) {
	return func() (float64, bool) { return t.median(lib, key) }
}

// bestPeer returns the better of the peers' medians of key.
func bestPeer(t *table, key string, higher bool) func() (float64, bool) {
	return func() (float64, bool) {
		best, found := math.NaN(), false
		for _, p := range peers {
			v, ok := t.median(p, key)
			if !ok {
				continue
			}
			if !found || higher && v > best || !higher && v < best {
				best, found = v, true
			}
		}
		return best, found
	}
}

func uncontendedChecks(t *table) []check {
	return []check{
		ratioCheck(t, "1. uncontended pairs/s ≥ 0.9× the floor", colPairsPerSec, 0.9, "floor", of(t, "floor", colPairsPerSec), true),
		ratioCheck(t, "1. uncontended pairs/s ≥ 1.0× redislock", colPairsPerSec, 1.0, "redislock", of(t, "redislock", colPairsPerSec), true),
		limitCheck(t, "1. exactly 2 round trips per uncontended pair", colRoundTrips, func(v float64) bool { return math.Abs(v-2) < 0.005 }),
	}
}

func waiterCheck(t *table) check {
	return limitCheck(t, "2. a blocked waiter sends ≤ 1 command/s", colWaiterCommands, func(v float64) bool { return v <= 1 })
}

func contendedChecks(t *table, workers int, perWorker bool) []check {
	where := fmt.Sprintf("3. W = %d, hold 1 ms, one shared client:", workers)
	if perWorker {
		where = fmt.Sprintf("3. W = %d, hold 1 ms, a client per worker:", workers)
	}
	return []check{
		ratioCheck(t, where+" wait p99 ≤ 0.2× the better peer's", colWait99, 0.2, "better peer", bestPeer(t, colWait99, false), false),
		ratioCheck(t, where+" acq/s ≥ 0.95× the better peer's", colAcqPerSec, 0.95, "better peer", bestPeer(t, colAcqPerSec, true), true),
		limitCheck(t, where+" Jain's index ≥ 0.98", colJain, func(v float64) bool { return v >= 0.98 }),
	}
}

func heldChecks(t *table, locks int) []check {
	return []check{
		limitCheck(t, fmt.Sprintf("5. %s held locks: ≤ 1 renewal round trip per 100 locks per period", formatNum(float64(locks), 0)),
			colRenewRTPer100, func(v float64) bool { return v <= 1 }),
		limitCheck(t, "5. goroutines do not grow with held locks (≤ 5 added)", colGoroutines, func(v float64) bool { return v <= 5 }),
	}
}

// writeVerdicts renders the checks as a Markdown table.
func writeVerdicts(w io.Writer, cfg config, checks []check) {
	if len(checks) == 0 {
		return
	}
	fmt.Fprintf(w, "### Targets (medians)\n\n")
	if cfg.smoke {
		fmt.Fprintf(w, "A smoke run is too short to judge; the verdicts below only show the checks run.\n\n")
	}
	fmt.Fprintf(w, "| target | measured | verdict |\n|:--|:--|:--|\n")
	for _, c := range checks {
		v := c()
		result := "not measured"
		switch {
		case v.known && v.met:
			result = "met"
		case v.known:
			result = "**missed**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", v.target, strings.ReplaceAll(v.measured, "|", "/"), result)
	}
	fmt.Fprintln(w)
}
