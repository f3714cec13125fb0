package cronlock_test

// A replica refused the tick marker works out, from what is left of the
// marker's lease, the tick the holder took it for, and reports
// skipped-other-spec when that is not a tick of its own spec: never on a
// healthy fleet (a stalled Redis, uneven specs, clocks within tolerance),
// and also for a spec moved by one second.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// A healthy fleet (one spec, one clock) meets a Redis that stalls for 1.2 s
// (a fork, a slow command, a swapped page) just after a tick, with the
// default skew tolerance (500 ms): both replicas' marker attempts wait in
// Redis, the first to run takes the tick and runs it (its answer comes
// before the lateness bound, tick + 1.5 s), the other finds the marker.
// That is skipped-tick-done; it must not be reported, at Error, as
// skipped-other-spec ("this tick runs nowhere ... different specs?").
//
// Both calls were equally late, yet otherSpec takes the observer's clock
// after its answer, so the stall shows up whole in the tick it works out
// (tick + 1.2 s), beyond the 2 × 500 ms margin.
func TestOtherSpecFalseAlarmWhenRedisStalls(t *testing.T) {
	for _, tc := range []struct {
		spec string
		tick func(time.Time) time.Time // the next tick after t
	}{
		{"0 0 3 * * *", func(t time.Time) time.Time {
			d := time.Date(t.Year(), t.Month(), t.Day(), 3, 0, 0, 0, time.UTC)
			if !d.After(t) {
				d = d.AddDate(0, 0, 1)
			}
			return d
		}},
		{"@every 1h", func(t time.Time) time.Time { return t.Truncate(time.Hour).Add(time.Hour) }},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			srv, rdb := newReal(t)
			name := uniqueName()
			// One clock for both, running at real speed: tick - 100 ms now.
			tick := tc.tick(time.Now().UTC())
			shift := time.Until(tick.Add(-100 * time.Millisecond))
			now := func() time.Time { return time.Now().Add(shift) }
			a := newSpecReplica(t, srv.Client(t), tc.spec, name, now)
			b := newSpecReplica(t, srv.Client(t), tc.spec, name, now)
			// Connections made and scripts loaded: the stall is the only delay.
			for _, r := range []*specReplica{a, b} {
				_, unlock, err := r.l.TryLock(context.Background(), "warm-"+name)
				if err != nil {
					t.Fatal(err)
				}
				_ = unlock()
			}
			_ = rdb
			time.Sleep(tick.Add(10 * time.Millisecond).Sub(now()))
			if d := now().Sub(tick); d < 0 || d > 60*time.Millisecond {
				t.Fatalf("premise: clock %v after the tick", d)
			}

			srv.Pause()
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); fire(a.c, a.id) }()
			time.Sleep(20 * time.Millisecond)
			go func() { defer wg.Done(); fire(b.c, b.id) }()
			time.Sleep(1200 * time.Millisecond)
			srv.Resume()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("attempts did not end within 10 s")
			}
			all := append(a.rec.all(), b.rec.all()...)
			if len(all) != 2 {
				t.Fatalf("attempts %v, want 2", all)
			}
			counts := map[cronlock.Outcome]int{}
			for _, at := range all {
				counts[at.Outcome]++
				t.Logf("%s: tick %s, %s (%v)", tc.spec, at.Tick.Format(time.RFC3339Nano), at.Outcome, at.Err)
			}
			if counts[cronlock.OutcomeRan] != 1 {
				t.Fatalf("premise: %d runs of the tick, want 1 (answers before the lateness bound)", counts[cronlock.OutcomeRan])
			}
			if counts[cronlock.OutcomeSkippedOtherSpec] != 0 || counts[cronlock.OutcomeSkippedTickDone] != 1 {
				t.Errorf("one spec, one clock, a 1.2 s Redis stall: outcomes %v, want ran and skipped-tick-done, never skipped-other-spec", counts)
			}
		})
	}
}

// One spec whose ticks are not evenly spaced ("0,1 * * * * *": second 0
// and second 1 of each minute, so tick :00 is kept 7/8 of 1 s and tick :01
// 4 × 500 ms), on two replicas whose clocks are 150 ms apart (within the
// default 500 ms tolerance). Replica A runs :00; B, ahead, fires for :01
// while A still keeps the marker of :00 (its own spec's previous tick, as
// the existing same-spec case with a regular spec). B must report
// skipped-tick-done, and A, firing for :01 a moment later, runs it.
//
// otherSpec computes the holder's tick with the hold of B's own tick (2 s)
// although the marker was taken for a tick with a hold of 875 ms: the
// worked-out tick is 1.27 s early, more than 2 × tolerance from :00.
func TestOtherSpecFalseAlarmOnUnevenSpec(t *testing.T) {
	srv, rdb := locktest.NewRedis(t)
	minute := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	ms := func(n int) time.Time { return minute.Add(time.Duration(n) * time.Millisecond) }
	const spec = "0,1 * * * * *"
	name := uniqueName()
	ca, cb := newFakeClock(minute), newFakeClock(minute)
	a := newSpecReplica(t, rdb, spec, name, ca.now)
	b := newSpecReplica(t, rdb, spec, name, cb.now)

	if at := a.fireAt(t, ca, ms(10)); at.Outcome != cronlock.OutcomeRan {
		t.Fatalf("A at :00.010 = %s (%v), want ran", at.Outcome, at.Err)
	}
	srv.FastForward(840 * time.Millisecond) // 840 ms pass for the TTLs: :00.850
	bt := b.fireAt(t, cb, ms(1000))         // B is 150 ms ahead
	t.Logf("B (150 ms ahead) for :01 while A keeps :00's marker: %s (%v)", bt.Outcome, bt.Err)
	srv.FastForward(170 * time.Millisecond)
	at := a.fireAt(t, ca, ms(1020))
	t.Logf("A for :01, 20 ms after it: %s (%v)", at.Outcome, at.Err)
	if at.Outcome != cronlock.OutcomeRan {
		t.Fatalf("premise: A's attempt for :01 = %s, want ran", at.Outcome)
	}
	if bt.Outcome != cronlock.OutcomeSkippedTickDone || errors.Is(bt.Err, cronlock.ErrOtherSpec) {
		t.Errorf("same spec, clocks 150 ms apart: B = %s (%v), want skipped-tick-done; tick :01 did run, on A", bt.Outcome, bt.Err)
	}
}

// A rolling deploy moves a job by one second ("0 * * * * *" to
// "1 * * * * *"), default tolerance, clocks in agreement (both on Redis's
// time: on its own clock B could not tell a clock 1 s off): A, on the old
// spec, runs :00 and keeps the marker 2 s; B, on the new spec, fires at :01
// and finds it. Tick :01 runs nowhere (A's spec does not have it): that
// is what skipped-other-spec is for. With a 500 ms tolerance a one-second
// move is the only change whose ticks meet a marker, yet the worked-out
// tick (:00, plus the calls' latencies) is never more than 2 × 500 ms from
// :01, so it goes unreported, as skipped-tick-done: "a tick that ran
// nowhere is never reported as done elsewhere".
func TestOtherSpecMissesOneSecondMove(t *testing.T) {
	minute := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	srv := newFakeRedisTime(t, minute)
	ms := func(n int) time.Time { return minute.Add(time.Duration(n) * time.Millisecond) }
	name := uniqueName()
	ca, cb := newFakeClock(minute), newFakeClock(minute)
	a := newSpecReplicaOnRedisTime(t, srv, "0 * * * * *", name, ca)
	b := newSpecReplicaOnRedisTime(t, srv, "1 * * * * *", name, cb)
	if at := a.fireAt(t, ca, ms(10)); at.Outcome != cronlock.OutcomeRan {
		t.Fatalf("A at :00.010 = %s (%v), want ran", at.Outcome, at.Err)
	}
	srv.FastForward(1000 * time.Millisecond)
	bt := b.fireAt(t, cb, ms(1010))
	t.Logf("B (new spec) for :01 while A (old spec) keeps :00's marker: %s (%v)", bt.Outcome, bt.Err)
	if bt.Outcome != cronlock.OutcomeSkippedOtherSpec {
		t.Errorf("tick :01 of the new spec ran nowhere, reported %s; want skipped-other-spec", bt.Outcome)
	}
}

// A healthy fleet on real crons: "*/3 * * * * *" (a period the detection
// can tell apart: 3 s > 2 × 2 × 500 ms), three replicas with clocks
// -200 ms, 0 and +250 ms off (450 ms apart, within the default tolerance),
// each run taking 100 ms, for 10 s: every tick runs once and no attempt
// says skipped-other-spec.
func TestOtherSpecNeverOnHealthyFleet(t *testing.T) {
	_, rdb := newReal(t)
	name := uniqueName()
	var mu sync.Mutex
	runs := map[time.Time]int{}
	job := func(ctx context.Context) error {
		tick, _ := cronlock.Tick(ctx)
		mu.Lock()
		runs[tick]++
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		return nil
	}
	var recs []*recorder
	var scheds []*cronlock.Scheduler
	for _, off := range []time.Duration{-200 * time.Millisecond, 0, 250 * time.Millisecond} {
		rec := newRecorder()
		c := cron.New(cron.WithSeconds(), cron.WithLocation(time.UTC))
		s := newScheduler(t, c, lockerOnly{locktest.NewClient(t, rdb)}, rec,
			cronlock.WithClock(func() time.Time { return time.Now().Add(off) }))
		mustAdd(t, s, "*/3 * * * * *", name, job)
		recs, scheds = append(recs, rec), append(scheds, s)
	}
	for _, s := range scheds {
		s.Start()
	}
	time.Sleep(10 * time.Second)
	for _, s := range scheds {
		waitStopped(t, s)
	}
	counts := map[cronlock.Outcome]int{}
	for _, rec := range recs {
		for _, a := range rec.all() {
			counts[a.Outcome]++
			if a.Outcome == cronlock.OutcomeSkippedOtherSpec {
				t.Errorf("healthy fleet: %v", a.Err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("outcomes %v, runs per tick %v", counts, runs)
	if counts[cronlock.OutcomeRan] < 3 {
		t.Errorf("%d runs in 10 s, want at least 3", counts[cronlock.OutcomeRan])
	}
	for tick, n := range runs {
		if n != 1 {
			t.Errorf("tick %s ran %d times", tick.Format(time.RFC3339), n)
		}
	}
}
