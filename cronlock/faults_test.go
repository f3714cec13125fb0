package cronlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// The holder of a tick's marker lets go of it at its next tick, however
// late its release timer (TestHolderLetsGoAtNextTick). After Update gives
// the job new options (same spec), the new entry knows nothing of the
// marker the old entry holds: the next tick, on this replica alone, finds
// its own replica's marker and is reported skipped-tick-done ("runs on
// another replica") while it runs nowhere.
func TestUpdateDropsMarkerHandoff(t *testing.T) {
	t.Parallel()
	clk := newFakeClock(tick0.Add(10 * time.Millisecond))
	r := newLocalReplica(t, newRedis(t), nil, cronlock.WithClock(clk.now))
	name := uniqueName()
	fire(r.c, r.add(t, name, nop))
	if a := r.rec.only(t); a.Outcome != cronlock.OutcomeRan {
		t.Fatalf("tick 0: %s, want ran", a.Outcome)
	}
	id, err := r.s.Update(name, "@every 1s", cronlock.AtMostFor(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	clk.set(tick0.Add(time.Second + 10*time.Millisecond)) // the next tick, before the 875 ms release timer
	fire(r.c, id)
	if a := r.rec.all()[1]; a.Outcome != cronlock.OutcomeRan {
		t.Errorf("tick 1 after Update (one replica): %s (%v), want ran: the holder must let go of its marker at its next tick", a.Outcome, a.Err)
	}
}

// Update from "@every 10s" to "@every 1s" right after a tick ran: the old
// entry keeps the marker for 2 s (4 × tolerance), so the next tick of the
// new spec, 1 s later, finds it and is reported skipped-tick-done, on a
// replica that is alone: the tick runs nowhere (issue 15 item 2: a tick
// that ran nowhere is never skipped-tick-done). Real time, no clock jump.
func TestUpdateToShorterPeriodLosesTicksAsTickDone(t *testing.T) {
	t.Parallel()
	r := newReplica(t, newRedis(t), nil)
	name := uniqueName()
	mustAdd(t, r.s, "@every 2s", name, nop)
	r.s.Start()
	r.rec.waitFor(t, cronlock.OutcomeRan, 3*time.Second)
	// The marker of the 2 s job is kept min(2 s, 1.75 s) = 1.75 s after its tick.
	if _, err := r.s.Update(name, "@every 1s"); err != nil {
		t.Fatal(err)
	}
	r.rec.waitN(t, 3, 4*time.Second)
	waitStopped(t, r.s)
	for _, a := range r.rec.all() {
		t.Logf("tick %s: %s %v", a.Tick.Format("15:04:05.000"), a.Outcome, a.Err)
	}
	if n := r.rec.count(cronlock.OutcomeSkippedTickDone); n != 0 {
		t.Errorf("%d ticks reported skipped-tick-done on a replica alone after Update", n)
	}
}

// Remove, then AddFunc with the same name (a re-registration): same loss
// of the marker handoff as Update.
func TestRemoveAddSameNameDropsMarkerHandoff(t *testing.T) {
	t.Parallel()
	clk := newFakeClock(tick0.Add(10 * time.Millisecond))
	r := newLocalReplica(t, newRedis(t), nil, cronlock.WithClock(clk.now))
	name := uniqueName()
	fire(r.c, r.add(t, name, nop))
	if err := r.s.Remove(name); err != nil {
		t.Fatal(err)
	}
	id := r.add(t, name, nop)
	clk.set(tick0.Add(time.Second + 10*time.Millisecond))
	fire(r.c, id)
	if a := r.rec.all()[1]; a.Outcome != cronlock.OutcomeRan {
		t.Errorf("tick 1 after Remove + AddFunc (one replica): %s, want ran", a.Outcome)
	}
}

// overlap counts runs in progress across replicas of one process.
type overlap struct {
	in, max, runs atomic.Int64
}

func (o *overlap) job(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		n := o.in.Add(1)
		defer o.in.Add(-1)
		o.runs.Add(1)
		for {
			m := o.max.Load()
			if n <= m || o.max.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return nil
	}
}

// RunNow hammered on two replicas (own lock Clients, one real Redis)
// while the scheduled ticks run: runs never overlap.
func TestRunNowTwoReplicasNoOverlap(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	a, b := newReplica(t, rdb, nil), newReplica(t, rdb, nil)
	name := uniqueName()
	var o overlap
	a.add(t, name, o.job(30*time.Millisecond))
	b.add(t, name, o.job(30*time.Millisecond))
	a.s.Start()
	b.s.Start()
	var wg sync.WaitGroup
	var ran, held atomic.Int64
	deadline := time.Now().Add(2500 * time.Millisecond)
	for _, r := range []*replica{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				at, err := r.s.RunNow(name)
				if err != nil {
					t.Errorf("RunNow: %v", err)
					return
				}
				switch at.Outcome {
				case cronlock.OutcomeRan:
					ran.Add(1)
				case cronlock.OutcomeSkippedHeld:
					held.Add(1)
				default:
					t.Errorf("RunNow: %s (%v)", at.Outcome, at.Err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("RunNow: %d ran, %d skipped-held; %d runs in all", ran.Load(), held.Load(), o.runs.Load())
	if o.max.Load() > 1 {
		t.Errorf("%d runs at once, want 1", o.max.Load())
	}
	if ran.Load() == 0 {
		t.Errorf("no RunNow ran")
	}
}

// Update and Remove + AddFunc of a job while its run is in progress, on
// real crons: no two runs of the job overlap, on this replica or another.
func TestUpdateRemoveDuringRunNoOverlap(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	a, b := newReplica(t, rdb, nil), newReplica(t, rdb, nil)
	name := uniqueName()
	var o overlap
	fnA, fnB := o.job(1300*time.Millisecond), o.job(1300*time.Millisecond)
	a.add(t, name, fnA)
	b.add(t, name, fnB)
	a.s.Start()
	b.s.Start()
	deadline := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		for o.in.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		r := []*replica{a, b}[i%2]
		if i%3 == 0 {
			if err := r.s.Remove(name); err != nil {
				t.Fatal(err)
			}
			r.add(t, name, o.job(1300*time.Millisecond), cronlock.AtMostFor(3*time.Second))
		} else if _, err := r.s.Update(name, "@every 1s", cronlock.AtMostFor(2*time.Second), cronlock.AtLeastFor(500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	waitStopped(t, a.s)
	waitStopped(t, b.s)
	t.Logf("%d runs", o.runs.Load())
	if o.max.Load() > 1 {
		t.Errorf("%d runs at once, want 1", o.max.Load())
	}
	if o.runs.Load() < 2 {
		t.Errorf("%d runs in 4 s, want at least 2", o.runs.Load())
	}
}

// RunNow with AtLeastFor, then Stop: Stop is immediate, and the run lock
// stays taken until the AtLeastFor window ends, though the lock's lease
// (1 s) is shorter and no longer renewed, and is free right after
// (goleak checks the release goroutines ended).
func TestStopAfterRunNowKeepsAtLeastFor(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	r := newReplica(t, rdb, []lock.Option{lock.WithDefaultLease(time.Second)}, cronlock.WithStopGrace(5*time.Second))
	other := locktest.NewClient(t, rdb)
	name := uniqueName()
	const window = 2500 * time.Millisecond
	mustAdd(t, r.s, "@every 4s", name, nop, cronlock.AtLeastFor(window))
	start := time.Now()
	if a, err := r.s.RunNow(name); err != nil || a.Outcome != cronlock.OutcomeRan {
		t.Fatalf("RunNow = %s, %v", a.Outcome, err)
	}
	stopped := time.Now()
	select {
	case <-r.s.Stop().Done():
	case <-time.After(time.Second):
		t.Fatal("Stop not done within 1 s with no run in progress")
	}
	if d := time.Since(stopped); d > 500*time.Millisecond {
		t.Errorf("Stop took %v", d)
	}
	time.Sleep(time.Until(start.Add(window - 700*time.Millisecond))) // past the 1 s lease
	tried := time.Since(start)
	if _, unlock, err := other.TryLock(context.Background(), runKey(name)); err == nil {
		_ = unlock()
		t.Fatalf("run lock free %v after RunNow, within its %v AtLeastFor window", tried, window)
	}
	d := time.Since(start) + waitFree(t, other, runKey(name))
	t.Logf("run lock free %v after RunNow (AtLeastFor %v)", d, window)
	if d > window+time.Second {
		t.Errorf("run lock free %v after RunNow, want at the end of the %v window (within 1 s)", d, window)
	}
}

// Many "@every 1s" jobs on three replicas of one real Redis: the lateness
// bound put on each Redis call does not turn healthy ticks into failures
// or lost ticks, and no tick runs twice.
func TestLatenessBoundUnderLoad(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	const jobs = 40
	reps := []*replica{newReplica(t, rdb, nil), newReplica(t, rdb, nil), newReplica(t, rdb, nil)}
	var mu sync.Mutex
	runs := map[string]map[time.Time]int{}
	for j := 0; j < jobs; j++ {
		name := uniqueName()
		runs[name] = map[time.Time]int{}
		for _, r := range reps {
			r.add(t, name, func(ctx context.Context) error {
				tick, _ := cronlock.Tick(ctx)
				mu.Lock()
				runs[name][tick]++
				mu.Unlock()
				return nil
			})
		}
	}
	for _, r := range reps {
		r.s.Start()
	}
	time.Sleep(3 * time.Second)
	for _, r := range reps {
		waitStopped(t, r.s)
	}
	counts := map[cronlock.Outcome]int{}
	for _, r := range reps {
		for _, a := range r.rec.all() {
			counts[a.Outcome]++
			if a.Outcome == cronlock.OutcomeFailed || a.Outcome == cronlock.OutcomeSkippedLate {
				t.Errorf("%s tick %s: %s %v", a.Job, a.Tick.Format("15:04:05.000"), a.Outcome, a.Err)
			}
		}
	}
	t.Logf("outcomes: %v", counts)
	mu.Lock()
	defer mu.Unlock()
	for name, ticks := range runs {
		for tick, n := range ticks {
			if n > 1 {
				t.Errorf("%s tick %v ran %d times", name, tick, n)
			}
		}
	}
}

// Stop (grace 0) while RunNow waits for a stalled Redis to answer for the
// run lock: the attempt is cancelled by Stop, not a Redis failure; it
// should be reported stopped (Warn), not failed (Error), and Stop is done
// within grace + 1 s.
func TestStopDuringRunNowOnStalledRedis(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	r := newReplica(t, rdb, nil, cronlock.WithStopGrace(0), cronlock.WithSkewTolerance(2*time.Second))
	name := uniqueName()
	mustAdd(t, r.s, "@every 10s", name, nop)
	srv.Pause()
	t.Cleanup(srv.Resume)
	got := make(chan cronlock.Attempt, 1)
	go func() {
		a, _ := r.s.RunNow(name)
		got <- a
	}()
	time.Sleep(200 * time.Millisecond) // RunNow is waiting for Redis (2 s bound)
	start := time.Now()
	select {
	case <-r.s.Stop().Done():
	case <-time.After(3 * time.Second):
		t.Fatal("Stop not done within 3 s")
	}
	t.Logf("Stop done after %v", time.Since(start))
	a := <-got
	t.Logf("RunNow: %s %v", a.Outcome, a.Err)
	if a.Outcome == cronlock.OutcomeFailed {
		t.Errorf("RunNow cancelled by Stop reported %s (%v), want stopped", a.Outcome, a.Err)
	}
}
