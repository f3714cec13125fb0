package cronlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/cronlock"
)

// RunNow's tick is the time of the call by the Scheduler's clock as
// corrected by Redis's, never the zero time: a job idempotent by tick
// gets the time it was run. Before the Scheduler knows Redis's time
// (before Start), RunNow's job is told there is no tick (ok false).
func TestRunNowTickIsTheCallTime(t *testing.T) {
	t.Parallel()
	redisNow := tick0.Add(time.Hour + 250*time.Millisecond) // Redis's clock, an hour ahead of the host's
	srv := newFakeRedisTime(t, redisNow)

	type seen struct {
		tick time.Time
		ok   bool
	}
	got := make(chan seen, 1)
	job := func(ctx context.Context) error {
		tick, ok := cronlock.Tick(ctx)
		got <- seen{tick, ok}
		return nil
	}
	runNow := func(t *testing.T, s *cronlock.Scheduler, name string) (cronlock.Attempt, seen) {
		t.Helper()
		a, err := s.RunNow(name)
		if err != nil || a.Outcome != cronlock.OutcomeRan {
			t.Fatalf("RunNow = %s, %v; want ran", a.Outcome, err)
		}
		return a, <-got
	}

	r := srv.newReplica(t, nil, cronlock.WithClock(newFakeClock(tick0).now))
	name := uniqueName()
	mustAdd(t, r.s, "0 0 3 1 1 *", name, job)
	if a, s := runNow(t, r.s, name); s.ok || !s.tick.IsZero() || !a.Tick.IsZero() {
		t.Errorf("RunNow before Start: Tick(ctx) = %v, %v, attempt tick %v; want no tick (ok false)", s.tick, s.ok, a.Tick)
	}
	r.s.Start()
	if a, s := runNow(t, r.s, name); !s.ok || !s.tick.Equal(redisNow) || !a.Tick.Equal(redisNow) {
		t.Errorf("RunNow after Start: Tick(ctx) = %v, %v, attempt tick %v; want %v (Redis's time), true", s.tick, s.ok, a.Tick, redisNow)
	}

	// A Locker that cannot tell Redis's time: the Scheduler's own clock.
	own := newScheduler(t, r.c, lockerOnly{r.locker}, nil, cronlock.WithClock(newFakeClock(tick0).now))
	name = uniqueName()
	mustAdd(t, own, "0 0 3 1 1 *", name, job)
	if a, s := runNow(t, own, name); !s.ok || !s.tick.Equal(tick0) || !a.Tick.Equal(tick0) {
		t.Errorf("RunNow on the Scheduler's own clock: Tick(ctx) = %v, %v, attempt tick %v; want %v, true", s.tick, s.ok, a.Tick, tick0)
	}
}
