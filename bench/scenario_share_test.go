package main

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestSameCostChecksJudgeAcquireAgainstLock(t *testing.T) {
	tb := newTable("t", "", pairColumns(column{colRedisUsec, "", 1})...)
	tb.add("Lock", figures{colPairsPerSec: 1000, "lock50": 100, "unlock50": 100, colRedisUsec: 20, colAllocs: 28, colRoundTrips: 2})
	tb.add("Acquire, limit 1", figures{colPairsPerSec: 899, "lock50": 110, "unlock50": 111, colRedisUsec: 21, colAllocs: 31, colRoundTrips: 2})
	expectVerdicts(t, judge(sameCostChecks(tb, "Acquire, limit 1")), []wantVerdict{
		{false, "Acquire, limit 1 899.00, Lock 1,000.00: 0.899×"}, // pairs/s: higher is better
		{true, "Acquire, limit 1 110.00, Lock 100.00: 1.100×"},    // 1.1× is within 10 %
		{false, "Acquire, limit 1 111.00, Lock 100.00: 1.110×"},
		{true, "Acquire, limit 1 21.00, Lock 20.00: 1.050×"},
		{false, "Acquire, limit 1 31.00, Lock 28.00: 1.107×"},
		{true, "Acquire, limit 1 2.00, Lock 2.00: 1.000×"},
	})
}

func TestScaleChecksWantEightTimesLockAndEveryPermitUsed(t *testing.T) {
	tb := newTable("t", "", column{colAcqPerSec, "", 0}, column{colMost, "", 0})
	tb.add("Lock", figures{colAcqPerSec: 500, colMost: 1})
	tb.add("Acquire, limit 8", figures{colAcqPerSec: 3600, colMost: 8})
	got := judge(scaleChecks(tb, asSemaphore(8), "W = 32"))
	expectVerdicts(t, got, []wantVerdict{
		{true, "Acquire, limit 8 3,600.00, Lock 500.00: 7.200×"}, // exactly 0.9 × 8
		{true, "Acquire, limit 8 8"},
	})
	if want := "8. W = 32: Acquire, limit 8 acq/s ≥ 0.9 × 8 × Lock's"; got[0].target != want {
		t.Errorf("target %q, want %q", got[0].target, want)
	}
	tb.add("Acquire, limit 8", figures{colAcqPerSec: 3000, colMost: 7})
	tb.add("Acquire, limit 8", figures{colAcqPerSec: 3000, colMost: 7})
	expectVerdicts(t, judge(scaleChecks(tb, asSemaphore(8), "W = 32")), []wantVerdict{
		{false, "Acquire, limit 8 3,000.00, Lock 500.00: 6.000×"},
		{false, "Acquire, limit 8 7"},
	})
}

// TestShareRowsHoldAsManyAsTheyMay runs scenario 8's contended loop for
// a moment on a real Redis: the semaphore's workers hold up to its limit
// together, the readers more than one, the Lock's one.
func TestShareRowsHoldAsManyAsTheyMay(t *testing.T) {
	srv := startTestServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.addr})
	defer admin.Close()
	e := &env{addr: srv.addr, admin: admin, cfg: config{run: 300 * time.Millisecond, lease: 8 * time.Second}}
	for _, tc := range []struct {
		lib      library
		min, max float64
	}{
		{asLock, 1, 1},
		{asSemaphore(4), 2, 4},
		{asReaders, 2, 8},
	} {
		s := contendedCase("t", []library{tc.lib}, 8, 5*time.Millisecond, false, shareColumns...)
		if err := runOne(context.Background(), e, s, tc.lib); err != nil {
			t.Fatalf("%s: %v", tc.lib.name, err)
		}
		most, _ := s.table.median(tc.lib.name, colMost)
		acqs, _ := s.table.median(tc.lib.name, colAcqPerSec)
		busy, _ := s.table.median(tc.lib.name, colBusy)
		hold, _ := s.table.median(tc.lib.name, colHold50)
		if most < tc.min || most > tc.max || math.IsNaN(acqs) || acqs <= 0 {
			t.Errorf("%s: %v held at once, %v acq/s; want %v to %v held, acquisitions", tc.lib.name, most, acqs, tc.min, tc.max)
		}
		// Over 100 % when the next holders get the key before the releases
		// return, by as much as the machine delays the replies.
		if busy <= 0 || math.IsNaN(busy) {
			t.Errorf("%s: permits busy %v%%, want above 0", tc.lib.name, busy)
		}
		if hold < 5 {
			t.Errorf("%s: hold p50 %v ms, want at least the 5 ms slept", tc.lib.name, hold)
		}
		if _, ok := s.table.median(tc.lib.name, "handoff50"); ok != (tc.lib.most() == 1) {
			t.Errorf("%s: a hand-off time is %v, want one only for a lock", tc.lib.name, ok)
		}
	}
}
