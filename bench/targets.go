package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
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
	return rowRatioCheck(t, "lockkit", what, key, k, ref, refValue, higher)
}

// rowRatioCheck is ratioCheck for the table's row row.
func rowRatioCheck(t *table, row, what, key string, k float64, ref string, refValue func() (float64, bool), higher bool) check {
	return func() verdict {
		v := verdict{target: what}
		mine, ok1 := t.median(row, key)
		theirs, ok2 := refValue()
		if !ok1 || !ok2 || theirs == 0 {
			return v
		}
		v.known = true
		v.measured = fmt.Sprintf("%s %s, %s %s: %.3f×", row, formatNum(mine, 2), ref, formatNum(theirs, 2), mine/theirs)
		if higher {
			v.met = mine >= k*theirs
		} else {
			v.met = mine <= k*theirs
		}
		return v
	}
}

// limitCheck compares lockkit's median of key with a bound, and shows it
// with decimals places.
func limitCheck(t *table, what, key string, decimals int, ok func(float64) bool) check {
	return rowLimitCheck(t, "lockkit", what, key, decimals, ok)
}

// rowLimitCheck is limitCheck for the table's row row.
func rowLimitCheck(t *table, row, what, key string, decimals int, ok func(float64) bool) check {
	return func() verdict {
		v := verdict{target: what}
		if mine, found := t.median(row, key); found {
			v.measured, v.met, v.known = row+" "+formatNum(mine, decimals), ok(mine), true
		}
		return v
	}
}

func of(t *table, lib, key string) func() (float64, bool) {
	return func() (float64, bool) { return t.median(lib, key) }
}

// bestPeer returns the best of the peers' medians of key: the highest when
// higher is better, else the lowest.
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
		ratioCheck(t, "1. uncontended pairs/s ≥ 1.0× the best peer", colPairsPerSec, 1.0, "best peer", bestPeer(t, colPairsPerSec, true), true),
		limitCheck(t, "1. exactly 2 round trips per uncontended pair", colRoundTrips, 3, func(v float64) bool { return math.Abs(v-2) < 0.005 }),
		limitCheck(t, "1. ≤ 30 allocations per uncontended lock + unlock (the whole process's; issue 32)", colAllocs, 1, func(v float64) bool { return v <= 30 }),
		ratioCheck(t, "1. Redis usec per uncontended pair ≤ 1.3× redislock's (issue 32)", colRedisUsec, 1.3, "redislock", of(t, "redislock", colRedisUsec), false),
	}
}

func waiterChecks(t *table) []check {
	return []check{
		limitCheck(t, "2. a blocked waiter sends ≤ 1 command/s", colWaiterCommands, 3, func(v float64) bool { return v <= 1 }),
		limitCheck(t, "2. a blocked waiter sends ≤ 4 commands over its wait (issue 32)", colWaiterTotal, 0, func(v float64) bool { return v <= 4 }),
	}
}

// contendedChecks are the targets of one case of scenario 3. The wait p99
// target is the earlier issue's, for a hold of 1 ms only.
func contendedChecks(t *table, workers int, hold time.Duration, perWorker bool) []check {
	clients := "one shared client"
	if perWorker {
		clients = "a client per worker"
	}
	where := fmt.Sprintf("3. W = %d, hold %s ms, %s:", workers, formatNum(millis(hold), 0), clients)
	checks := []check{
		ratioCheck(t, where+" acq/s ≥ 0.95× the best peer's", colAcqPerSec, 0.95, "best peer", bestPeer(t, colAcqPerSec, true), true),
		limitCheck(t, where+" Jain's index ≥ 0.98", colJain, 3, func(v float64) bool { return v >= 0.98 }),
		ratioCheck(t, where+" wait max ≤ 0.2× the best peer's", colWaitMax, 0.2, "best peer", bestPeer(t, colWaitMax, false), false),
	}
	if hold > 0 {
		checks = append(checks,
			ratioCheck(t, where+" wait p99 ≤ 0.2× the best peer's", colWait99, 0.2, "best peer", bestPeer(t, colWait99, false), false))
	}
	return append(checks,
		ratioCheck(t, where+" Redis usec/acq ≤ 1.5× the floor's (issue 32)", colRedisUsec, 1.5, "floor", of(t, "floor", colRedisUsec), false))
}

func manyKeysChecks(t *table) []check {
	return []check{
		ratioCheck(t, "4. many keys acq/s ≥ 0.9× the floor", colAcqPerSec, 0.9, "floor", of(t, "floor", colAcqPerSec), true),
		ratioCheck(t, "4. many keys Redis usec/acq ≤ 1.3× the floor's (issue 32)", colRedisUsec, 1.3, "floor", of(t, "floor", colRedisUsec), false),
	}
}

func heldChecks(t *table, locks int) []check {
	return []check{
		limitCheck(t, fmt.Sprintf("5. %s held locks: ≤ 1 renewal round trip per 100 locks per period", formatNum(float64(locks), 0)),
			colRenewRTPer100, 3, func(v float64) bool { return v <= 1 }),
		limitCheck(t, "5. goroutines do not grow with held locks (≤ 5 added)", colGoroutines, 3, func(v float64) bool { return v <= 5 }),
	}
}

func memoryChecks(t *table, keys int) []check {
	return rowMemoryChecks(t, "7.", "lockkit", "keys locked and released", keys)
}

// rowMemoryChecks are the targets of a memory scenario (number n, such as
// "7.") for the table's row row, whose keys are what.
func rowMemoryChecks(t *table, n, row, what string, keys int) []check {
	return []check{
		rowLimitCheck(t, row, fmt.Sprintf("%s %s %s: used_memory one lease + 1.5 s later within %d MiB of the start (change, MiB)",
			n, formatNum(float64(keys), 0), what, memWithinMiB), colMemAfterLease, 2, func(v float64) bool { return math.Abs(v) <= memWithinMiB }),
		rowLimitCheck(t, row, n+" no key left without a TTL", colMemNoTTL, 0, func(v float64) bool { return v == 0 }),
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
