package locktest

import (
	"os"
	"testing"
	"time"
)

// TimingEnv is the environment variable that makes timing bounds tight:
// LOCKKIT_TIMING=1 (CI sets it).
const TimingEnv = "LOCKKIT_TIMING"

// busyScale multiplies upper bounds on elapsed time without
// LOCKKIT_TIMING=1: the bound plus room for a 2-core machine running two
// busy loops and the other tests beside the one checking it (twice that
// under the race detector).
const busyScale = 4 * raceScale

// Tight reports whether timing bounds are checked as written
// (LOCKKIT_TIMING=1).
func Tight() bool { return os.Getenv(TimingEnv) == "1" }

// Timed marks t as a test whose assertions are tight upper bounds on
// elapsed time: with LOCKKIT_TIMING=1 it runs alone, not in parallel with
// other tests; otherwise in parallel, its bounds scaled by [Bound]. Either
// way it runs: it is never skipped.
func Timed(t *testing.T) {
	t.Helper()
	if !Tight() {
		t.Parallel()
	}
}

// Bound returns d as written with LOCKKIT_TIMING=1 and scaled for a busy
// machine otherwise. It scales upper bounds on elapsed time, and the
// durations whose ratio to such a bound a test keeps (a lease that must
// outlast a round trip).
func Bound(d time.Duration) time.Duration {
	if Tight() {
		return d
	}
	return d * busyScale
}

// Least returns the least number of events (holds, hand-offs) a test
// expects in a given time: n as written with LOCKKIT_TIMING=1, a share of
// it for a busy machine otherwise (at least 1).
func Least(n int) int {
	if Tight() {
		return n
	}
	return max(n/busyScale, 1)
}
