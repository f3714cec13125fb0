package cronlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Three replicas on Redis's time, one 2.5 s behind and one 2.5 s ahead of
// the host's clock, start while Redis is stalled (SIGSTOP for 1.2 s
// across their Starts), so that none can read Redis's TIME at Start. Each
// runs five "@every 6s" jobs (the skew is below half the period, so runs
// of one job less than 3 s apart are one tick run twice). A replica whose
// offset to Redis is unknown runs no tick and reports the ticks it skips
// as failed with ErrClockUnknown (a tick falls in that window); it
// measures again within a second. Over 20 s (15 ticks or more) no tick
// runs twice, and every job runs once the offsets are known. (Before the
// fix, 35 runs and 15 ticks run twice.)
func TestStartDuringRedisStallRunsNoTickTwice(t *testing.T) {
	t.Parallel()
	const (
		jobs   = 5
		period = 6 * time.Second
	)
	srv, rdb := newReal(t)
	var mu sync.Mutex
	starts := make([][]time.Time, jobs) // per job: when each run started
	var replicas []*replica
	for _, off := range []time.Duration{0, -2500 * time.Millisecond, 2500 * time.Millisecond} {
		r := &replica{locker: locktest.NewClient(t, rdb), c: cron.New(cron.WithSeconds()), rec: newRecorder()}
		r.s = newScheduler(t, r.c, r.locker, r.rec, cronlock.WithClock(func() time.Time { return time.Now().Add(off) }))
		for j := range jobs {
			mustAdd(t, r.s, "@every 6s", "blip-job-"+string(rune('a'+j)), func(context.Context) error {
				mu.Lock()
				starts[j] = append(starts[j], time.Now())
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				return nil
			})
		}
		replicas = append(replicas, r)
	}

	// Pause 1.5 s before a tick: the replica on the host's clock fires
	// for it after its Start gave up (1 s) and before it measures again
	// (unless the machine is so loaded that the Starts begin late).
	time.Sleep(time.Until(time.Now().Truncate(period).Add(period - 1500*time.Millisecond)))
	srv.Pause()
	var started sync.WaitGroup
	begun := make(chan struct{}, len(replicas))
	measuredAtStart := make([]bool, len(replicas))
	for i, r := range replicas {
		started.Add(1)
		go func() {
			defer started.Done()
			begun <- struct{}{}
			r.s.Start()
			_, measuredAtStart[i] = r.s.ClockOffset()
		}()
	}
	for range replicas {
		<-begun
	}
	// 1.2 s after the last Start began: every Start's measurement (1 s)
	// ends with no answer, or one too slow to count.
	time.Sleep(1200 * time.Millisecond)
	srv.Resume()
	started.Wait()
	for i, ok := range measuredAtStart {
		if ok {
			t.Fatalf("premise: replica %d measured its offset at Start with Redis stalled", i)
		}
	}
	time.Sleep(20 * time.Second)
	for _, r := range replicas {
		waitStopped(t, r.s)
	}

	twice, runs := 0, 0
	for j, ss := range starts {
		slices.SortFunc(ss, time.Time.Compare)
		runs += len(ss)
		for i := 1; i < len(ss); i++ {
			if ss[i].Sub(ss[i-1]) < period/2 {
				twice++
				t.Errorf("job %d: runs %v apart: one tick ran twice", j, ss[i].Sub(ss[i-1]).Round(time.Millisecond))
			}
		}
		if len(ss) < 2 {
			t.Errorf("job %d ran %d times in 20 s, want at least 2", j, len(ss))
		}
	}
	var unknown int
	for i, r := range replicas {
		if _, ok := r.s.ClockOffset(); !ok {
			t.Errorf("replica %d: offset still unknown 20 s after Redis resumed", i)
		}
		for _, a := range r.rec.all() {
			switch {
			case errors.Is(a.Err, cronlock.ErrClockUnknown):
				unknown++
			case a.Outcome == cronlock.OutcomeFailed || a.Outcome == cronlock.OutcomeLost,
				a.Outcome == cronlock.OutcomeSkippedOtherSpec || a.Outcome == cronlock.OutcomeSkippedSkew:
				t.Errorf("replica %d: attempt %s: %v", i, a.Outcome, a.Err)
			}
		}
	}
	// On a loaded machine the Starts may begin after the tick: unknown
	// is then 0 (TestClockOffsetRefusesSlowRoundTrips checks that a tick
	// with the offset unknown fails).
	t.Logf("%d runs, %d ticks run twice, %d attempts skipped with the offset unknown", runs, twice, unknown)
}
