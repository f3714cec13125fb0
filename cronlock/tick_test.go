package cronlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestEveryIsAligned checks that "@every d" ticks are the multiples of d,
// whenever a replica's cron asks, where cron's own schedule counts from
// the moment it is asked.
func TestEveryIsAligned(t *testing.T) {
	locker := locktest.NewClient(t, newRedis(t))
	c := cron.New()
	s := newScheduler(t, c, locker, nil)
	id := mustAdd(t, s, "@every 10s", uniqueName(), nop)
	sched := c.Entry(id).Schedule
	base := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 3500 * time.Millisecond, 9999 * time.Millisecond} {
		if got, want := sched.Next(base.Add(at)), base.Add(10*time.Second); !got.Equal(want) {
			t.Errorf("Next(base+%v) = %v, want %v", at, got, want)
		}
	}
	// cron's own schedule of the same spec is not aligned.
	if got, want := cron.Every(10*time.Second).Next(base.Add(3*time.Second)), base.Add(13*time.Second); !got.Equal(want) {
		t.Fatalf("cron.Every: Next = %v, want %v", got, want)
	}
}

// TestClockDrivesFiring checks that WithClock moves the times the cron
// fires at: a clock 10 min ahead fires an hourly tick 10 min early by the
// system clock, as a replica whose clock is 10 min ahead would.
func TestClockDrivesFiring(t *testing.T) {
	locker := locktest.NewClient(t, newRedis(t))
	const ahead = 10 * time.Minute
	c := cron.New()
	s := newScheduler(t, c, locker, nil, cronlock.WithClock(func() time.Time { return time.Now().Add(ahead) }))
	id := mustAdd(t, s, "@hourly", uniqueName(), nop)
	now := time.Now()
	hour := now.Add(ahead).Truncate(time.Hour).Add(time.Hour) // the next hour by the shifted clock
	got := c.Entry(id).Schedule.Next(now)
	if d := got.Sub(hour.Add(-ahead)); d < -time.Second || d > time.Second {
		t.Fatalf("Next(now) = %v, want %v (the hour %v by a clock %v ahead)", got, hour.Add(-ahead), hour, ahead)
	}
}

// TestTickAndLateness fires jobs at set clock readings: an attempt runs for
// the latest tick at or before the clock, unless it is more than
// hold - tolerance after it, where hold = min(4 tolerance, 7/8 period).
func TestTickAndLateness(t *testing.T) {
	rdb := newRedis(t)
	minute := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	const ms = time.Millisecond
	tests := []struct {
		name      string
		spec      string
		tolerance time.Duration
		at        time.Time
		want      cronlock.Outcome
		wantTick  time.Time
	}{
		{"on time", "@every 1s", 500 * ms, tick0, cronlock.OutcomeRan, tick0},
		{"every second, within 875-500 ms", "@every 1s", 500 * ms, tick0.Add(374 * ms), cronlock.OutcomeRan, tick0},
		{"every second, beyond 875-500 ms", "@every 1s", 500 * ms, tick0.Add(376 * ms), cronlock.OutcomeSkippedLate, tick0},
		{"small tolerance, within 400-100 ms", "@every 1s", 100 * ms, tick0.Add(299 * ms), cronlock.OutcomeRan, tick0},
		{"small tolerance, beyond 400-100 ms", "@every 1s", 100 * ms, tick0.Add(301 * ms), cronlock.OutcomeSkippedLate, tick0},
		{"aligned every", "@every 1m", 500 * ms, minute.Add(900 * ms), cronlock.OutcomeRan, minute},
		{"minutely, within 2000-500 ms", "0 * * * * *", 500 * ms, minute.Add(1499 * ms), cronlock.OutcomeRan, minute},
		{"minutely, beyond 2000-500 ms", "0 * * * * *", 500 * ms, minute.Add(1501 * ms), cronlock.OutcomeSkippedLate, minute},
		{"yearly, a day late", "0 0 0 1 1 *", 500 * ms, minute, cronlock.OutcomeSkippedLate, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"no tick within a period", "0 0 0 1,2 1 *", 500 * ms, minute.AddDate(0, 0, 3), cronlock.OutcomeSkippedLate, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			c := cron.New(cron.WithSeconds())
			s := newScheduler(t, c, lockerOnly{locktest.NewClient(t, rdb)}, rec,
				cronlock.WithSkewTolerance(tt.tolerance), cronlock.WithClock(newFakeClock(tt.at).now))
			fire(c, mustAdd(t, s, tt.spec, uniqueName(), nop))
			a := rec.only(t)
			if a.Outcome != tt.want || !a.Tick.Equal(tt.wantTick) {
				t.Fatalf("attempt at %v: %s for tick %v, want %s for %v", tt.at, a.Outcome, a.Tick, tt.want, tt.wantTick)
			}
		})
	}
}

// slowLocker delays TryLock of one key, as a slow Redis would.
type slowLocker struct {
	lock.Locker
	key   string
	delay time.Duration
}

func (l slowLocker) TryLock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	if key == l.key {
		time.Sleep(l.delay)
	}
	return l.Locker.TryLock(ctx, key, opts...)
}

// TestLateMarker gets the tick marker on time by the clock, but from a
// Redis that answers 450 ms later, beyond hold - tolerance (375 ms): the
// attempt is skipped as late, since another replica may have run the tick
// and let go of the marker in the meantime.
func TestLateMarker(t *testing.T) {
	start := time.Now()
	clock := func() time.Time { return tick0.Add(time.Since(start)) } // runs from tick0
	name := uniqueName()
	locker := slowLocker{locktest.NewClient(t, newRedis(t)), tickKey(name), 450 * time.Millisecond}
	rec := newRecorder()
	c := cron.New(cron.WithSeconds())
	s := newScheduler(t, c, locker, rec, cronlock.WithClock(clock))
	ran := false
	fire(c, mustAdd(t, s, "@every 1s", name, func(context.Context) error {
		ran = true
		return nil
	}))
	if a := rec.only(t); a.Outcome != cronlock.OutcomeSkippedLate || ran {
		t.Fatalf("attempt: %s, job ran: %v; want skipped-late, not run", a.Outcome, ran)
	}
}
