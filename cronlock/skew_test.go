package cronlock_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Two replicas on their own clocks (a Locker that cannot tell Redis's
// time) with the same spec, "*/5 * * * * *", B's clock 800 ms behind A's
// (beyond the 500 ms tolerance). A runs tick :05; B fires for :05 by its
// clock, 800 ms later, and finds A's marker, which by B's clock was taken
// for a tick at :04.2. That is clock skew, not another spec: B reports
// skipped-skew with ErrClockSkew, never skipped-other-spec.
func TestSkewReportedAsSkew(t *testing.T) {
	srv, rdb := locktest.NewRedis(t)
	base := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	replica := func() (*specReplica, *fakeClock) {
		clk := newFakeClock(base)
		return newSpecReplica(t, rdb, "*/5 * * * * *", "skewed", clk.now, cronlock.WithLogger(slog.New(slog.DiscardHandler))), clk
	}
	a, aClock := replica()
	b, bClock := replica()
	if at := a.fireAt(t, aClock, base.Add(5*time.Second+10*time.Millisecond)); at.Outcome != cronlock.OutcomeRan {
		t.Fatalf("A at :05.010 = %s (%v), want ran", at.Outcome, at.Err)
	}
	srv.FastForward(800 * time.Millisecond) // for the marker's TTL: B fires 800 ms after A
	at := b.fireAt(t, bClock, base.Add(5*time.Second+10*time.Millisecond))
	t.Logf("B: %s (%v)", at.Outcome, at.Err)
	if at.Outcome == cronlock.OutcomeSkippedOtherSpec || errors.Is(at.Err, cronlock.ErrOtherSpec) {
		t.Fatalf("B, same spec, clock 800 ms behind: %s (%v); skipped-other-spec is for different specs only", at.Outcome, at.Err)
	}
	if at.Outcome != cronlock.OutcomeSkippedSkew || !errors.Is(at.Err, cronlock.ErrClockSkew) {
		t.Fatalf("B, clock 800 ms behind: %s (%v), want skipped-skew, ErrClockSkew", at.Outcome, at.Err)
	}
}
