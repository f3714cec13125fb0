package cronlock

import (
	"fmt"
	"math"
	"time"

	"github.com/robfig/cron/v3"
)

// tickAt finds the tick a run that starts at now is for: the latest time
// of sched at or before now, no further back than the gap between the
// next two ticks (or tol, when there are none).
//
// hold is how long after the tick its marker is kept: min(4 tol, 7/8 of
// the period to the next tick). A run may take the marker only until
// hold - tol after the tick; later it is late. ok is false when there is
// no tick.
//
// Why: let the replicas' clocks be within tol of each other. The replica
// that takes the tick's marker lets go of it at tick + hold by its own
// clock; another replica, taking the marker at most hold - tol after the
// tick by its own clock, is by then at most hold after it by the holder's
// clock, so it finds the marker and skips. A replica that gets the marker
// later cannot tell whether the tick ran and skips as late. The holder
// lets go before its own next tick (at the latest when it fires for it),
// so that the next tick can run; the last eighth of the period keeps the
// marker's lease, a little longer than hold, from reaching the next tick
// when the holder crashed. A replica whose clock is ahead may find the
// previous tick's marker at its next tick: it skips, and the tick runs on
// a replica that fires after the release. Beyond 4 tol the marker guards
// nothing that matters more and would only delay Stop.
func tickAt(sched cron.Schedule, now time.Time, tol time.Duration) (tick time.Time, hold time.Duration, ok bool) {
	window := tol
	if next := sched.Next(now); !next.IsZero() {
		if gap := sched.Next(next).Sub(next); gap > 0 {
			window = gap
		}
	}
	tick = sched.Next(now.Add(-window))
	if tick.IsZero() || tick.After(now) {
		return time.Time{}, 0, false
	}
	for {
		n := sched.Next(tick)
		if n.IsZero() || !n.After(tick) || n.After(now) {
			break
		}
		tick = n
	}
	hold = time.Duration(math.MaxInt64)
	if tol < hold/4 {
		hold = 4 * tol
	}
	if period := sched.Next(tick).Sub(tick); period > 0 {
		hold = min(hold, period-period/8)
	}
	return tick, hold, true
}

// checkPeriod reports an error when tol leaves no time for a run at the
// next tick of sched after now: hold - tol must be positive.
func checkPeriod(sched cron.Schedule, now time.Time, tol time.Duration) error {
	next := sched.Next(now)
	if next.IsZero() {
		return nil
	}
	if period := sched.Next(next).Sub(next); period > 0 && tol >= period-period/8 {
		return fmt.Errorf("skew tolerance %v is not below 7/8 of the period %v", tol, period)
	}
	return nil
}

// checkAtLeast reports an error when AtLeastFor keeps the run lock up to
// the next tick of sched after now or beyond: every other tick would then
// find the job held and be skipped on every replica.
func checkAtLeast(sched cron.Schedule, now time.Time, j jobConfig) error {
	next := sched.Next(now)
	if !j.atLeastSet || next.IsZero() {
		return nil
	}
	if period := sched.Next(next).Sub(next); period > 0 && j.keepFor() >= period {
		return fmt.Errorf("AtLeastFor %v is not shorter than the period %v: every other tick would be skipped", j.atLeast, period)
	}
	return nil
}

// markerLease is the fixed lease of a tick marker kept for hold: long
// enough that the marker is released before its lease can end, short
// enough that a crashed replica's marker does not reach the next tick.
func markerLease(hold time.Duration) time.Duration {
	return hold + hold/16 + 20*time.Millisecond
}

// every is the schedule of "@every d", aligned: its ticks are the
// multiples of d since the zero time (for a d that divides a day, the
// times of day in UTC that are multiples of d), the same on every replica.
// cron's own ConstantDelaySchedule counts from when each cron started.
type every struct{ period time.Duration }

func (e every) Next(t time.Time) time.Time { return t.Truncate(e.period).Add(e.period) }

// clockSchedule fires sched by the Scheduler's time rather than by the
// system clock: it is what cron runs when the Scheduler keeps time by
// Redis's clock or by [WithClock]. ahead is how far the Scheduler's time
// is ahead of the system clock.
type clockSchedule struct {
	sched cron.Schedule
	ahead func() time.Duration
}

// Next is the first tick after t, by the system clock. A tick at t or
// before, which an offset that changed could give, is skipped: cron would
// fire it again at once.
func (s clockSchedule) Next(t time.Time) time.Time {
	ahead := s.ahead()
	next := s.sched.Next(t.Add(ahead))
	for !next.IsZero() && !next.Add(-ahead).After(t) {
		next = s.sched.Next(next)
	}
	if next.IsZero() {
		return next
	}
	return next.Add(-ahead)
}

// schedules returns the schedule, by the Scheduler's clock, that ticks
// are computed from, and the one cron runs.
func (s *Scheduler) schedules(parsed cron.Schedule) (ticks, fires cron.Schedule) {
	ticks = parsed
	if cd, ok := parsed.(cron.ConstantDelaySchedule); ok {
		ticks = every{cd.Delay}
	}
	fires = ticks
	if _, ok := clockOf(s.locker); ok || s.cfg.shifted {
		fires = clockSchedule{ticks, s.ahead}
	}
	return ticks, fires
}

// parse parses spec with c's own parser (seconds field, descriptors, time
// zone prefix as c was configured), through a placeholder entry that is
// removed at once: cron offers no other way to reach its parser.
func parse(c *cron.Cron, spec string) (cron.Schedule, error) {
	id, err := c.AddJob(spec, cron.FuncJob(func() {}))
	if err != nil {
		return nil, err
	}
	defer c.Remove(id)
	return c.Entry(id).Schedule, nil
}
