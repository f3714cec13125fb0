package main

import (
	"fmt"
	"time"
)

// Issue 33's scenarios: lockkit's semaphores and read-write locks beside
// its Lock, in the same run, through the same locker (lib_share.go).

const (
	// shareWorkers want one key all the time in scenario 8's contended
	// cases, each holding it for -sharehold.
	shareWorkers = 32
	// sharePermits is the limit of the semaphore whose permits scale.
	sharePermits = 8
	// memPermits is the limit of scenario 9's semaphores.
	memPermits = 3
)

// shareColumns are the columns scenario 8's contended cases add to
// scenario 3's: how many held the key at once; how busy its permits were
// (held from the take's return to the release's, within the run, over
// the run and the limit, or the workers for readers: a little over 100 %
// when the next holders got the key before the releases returned); what
// a holder's time is made of (its hold as slept, from the take's return
// to the release call, and the release call); and the CPU used.
var shareColumns = []column{
	{colMost, "most holders at once", 0},
	{colBusy, "permits busy (%)", 0},
	{colHold50, "hold p50 (ms)", 2},
	{colRelease50, "release p50 (ms)", 2},
	{colRelease99, "release p99 (ms)", 2},
	{colCores, "CPU used (cores, process + Redis)", 2},
}

// shares is scenario 8: Acquire with limit 1 beside Lock, uncontended;
// shareWorkers workers on a semaphore of sharePermits beside as many on a
// Lock, one client shared and then a client per worker; readers beside a
// Lock. The workers hold the key for hold each time. It returns the cases
// and the checks of their targets.
func shares(hold time.Duration) ([]scenario, []check) {
	one := asSemaphore(1)
	u := uncontendedCase("8. Uncontended, Lock beside Acquire with limit 1: one worker, sequential take + release of one key",
		[]library{asLock, one})
	scenarios := []scenario{u}
	checks := sameCostChecks(u.table, one.name)

	permits := asSemaphore(sharePermits)
	for _, perWorker := range []bool{false, true} {
		where := fmt.Sprintf("W = %d workers, hold %v, %s", shareWorkers, hold, clientsOf(perWorker))
		s := contendedCase(fmt.Sprintf("8. Permits scale: Lock of one key beside Acquire with limit %d, %s", sharePermits, where),
			[]library{asLock, permits}, shareWorkers, hold, perWorker, shareColumns...)
		scenarios = append(scenarios, s)
		checks = append(checks, scaleChecks(s.table, permits, where)...)
	}
	scenarios = append(scenarios, contendedCase(
		fmt.Sprintf("8. Readers: Lock of one key beside RLock, W = %d workers, hold %v, %s", shareWorkers, hold, clientsOf(false)),
		[]library{asLock, asReaders}, shareWorkers, hold, false, shareColumns...))
	return scenarios, checks
}

// sameCostChecks are the targets of the row row in an uncontended table
// beside the row "Lock": within 10 % of its rate, latencies, Redis time
// and allocations, and no more round trips.
func sameCostChecks(t *table, row string) []check {
	within := func(what, key string, higher bool) check {
		k, dir := 1.1, "≤ 1.1×"
		if higher {
			k, dir = 0.9, "≥ 0.9×"
		}
		return rowRatioCheck(t, row, fmt.Sprintf("8. uncontended %s: %s %s Lock's", row, what, dir), key, k, "Lock", of(t, "Lock", key), higher)
	}
	return []check{
		within("pairs/s", colPairsPerSec, true),
		within("take p50", "lock50", false),
		within("release p50", "unlock50", false),
		within("Redis usec per pair", colRedisUsec, false),
		within("allocations per pair", colAllocs, false),
		rowRatioCheck(t, row, fmt.Sprintf("8. uncontended %s: round trips per pair ≤ Lock's", row), colRoundTrips, 1, "Lock",
			of(t, "Lock", colRoundTrips), false),
	}
}

// scaleChecks are the targets of the semaphore permits in a table of
// scenario 8's contended cases, beside the row "Lock".
func scaleChecks(t *table, permits library, where string) []check {
	n := permits.most()
	return []check{
		rowRatioCheck(t, permits.name, fmt.Sprintf("8. %s: %s acq/s ≥ 0.9 × %d × Lock's", where, permits.name, n),
			colAcqPerSec, 0.9*float64(n), "Lock", of(t, "Lock", colAcqPerSec), true),
		rowLimitCheck(t, permits.name, fmt.Sprintf("8. %s: %d permits held at once", where, n),
			colMost, 0, func(v float64) bool { return v == float64(n) }),
	}
}

// sharedMemory is scenario 9: scenario 7 over semaphore keys (limit
// memPermits), which must leave no key behind either.
func sharedMemory(keys int) (scenario, []check) {
	sem := asSemaphore(memPermits)
	s := memoryCase(fmt.Sprintf("9. Memory of semaphores: %s distinct keys acquired (limit %d) and released once each",
		formatNum(float64(keys), 0), memPermits), []library{sem}, keys)
	checks := append(rowMemoryChecks(s.table, "9.", sem.name, "semaphore keys acquired and released", keys),
		rowLimitCheck(s.table, sem.name, "9. no key left one lease + 1.5 s later", "keysLease", 0, func(v float64) bool { return v == 0 }))
	return s, checks
}
