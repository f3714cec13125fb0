package cronlock

import (
	"context"
	"log/slog"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// offsetEvery is how often a started Scheduler measures its clock's
// offset against Redis's; offsetRetry how often while it is unknown.
const (
	offsetEvery = 30 * time.Second
	offsetRetry = time.Second
)

// redisClock tells Redis's time: a Locker's own Time method, or a
// [lock.Client]'s (see [lock.Integration.Time]).
type redisClock interface {
	Time(ctx context.Context) (time.Time, error)
}

// clockOf returns what tells Redis's time for locker, and whether
// anything can: locker itself when it has a Time method (a wrapper's
// takes precedence over the Client it wraps), else its Client's.
func clockOf(locker lock.Locker) (redisClock, bool) {
	switch l := locker.(type) {
	case redisClock:
		return l, true
	case interface{ Integration() lock.Integration }:
		return l.Integration(), true
	}
	return nil, false
}

// now is the Scheduler's time: its clock corrected by the last measured
// offset against Redis's, so that replicas whose clocks disagree still
// agree on the ticks (see "Once per tick" in the package documentation).
func (s *Scheduler) now() time.Time {
	return s.cfg.clock().Add(time.Duration(s.offset.Load()))
}

// timeKnown tells whether the Scheduler knows its time: always when it
// keeps its own clock (the Locker cannot tell Redis's time), and once the
// offset was measured when it keeps Redis's.
func (s *Scheduler) timeKnown() bool {
	_, redis := clockOf(s.locker)
	return !redis || s.measured.Load()
}

// ahead is how far the Scheduler's time is ahead of the system clock.
func (s *Scheduler) ahead() time.Duration {
	d := time.Duration(s.offset.Load())
	if s.cfg.shifted {
		d += time.Until(s.cfg.clock())
	}
	return d
}

// ClockOffset returns how far Redis's clock (TIME) was ahead of this
// Scheduler's clock at the last measurement (negative: behind), measured
// at [Scheduler.Start] and every 30 s over the shortest of three round
// trips, to within half of it (a shortest round trip longer than the
// skew tolerance does not count), and false before the first
// measurement or when the Locker cannot tell Redis's time (a [lock.Client]
// can). The Scheduler fires and works out ticks by its clock corrected by
// this offset, so that replicas agree on ticks whatever their hosts'
// clocks say; an offset beyond the skew tolerance is logged at Error all
// the same, as the host's clock needs fixing.
//
// While a Scheduler whose Locker can tell Redis's time has no offset yet
// (Redis stalled or unreachable at Start), it runs no tick: by its own
// clock it cannot tell which tick another replica runs. It reports each
// tick as [OutcomeFailed] with [ErrClockUnknown] and measures again every
// second until a measurement succeeds.
func (s *Scheduler) ClockOffset() (time.Duration, bool) {
	ns := s.offset.Load()
	return time.Duration(ns), s.measured.Load()
}

// watchClock measures the offset every offsetEvery until Stop, and every
// offsetRetry while it is unknown.
func (s *Scheduler) watchClock(rc redisClock) {
	s.timers.Add(1)
	go func() {
		defer s.timers.Done()
		t := time.NewTimer(offsetRetry)
		defer t.Stop()
		for {
			if s.measured.Load() {
				t.Reset(offsetEvery)
			} else {
				t.Reset(offsetRetry)
			}
			select {
			case <-t.C:
				s.measureOffset(rc)
			case <-s.life.Done():
				return
			}
		}
	}()
}

// offsetSamples is how many times a measurement of the clock offset asks
// Redis for its time.
const offsetSamples = 3

// measureOffset asks Redis for its time offsetSamples times, within 1 s,
// and compares the answer of the shortest round trip with the Scheduler's
// clock halfway through it (Cristian's algorithm): the offset is then off
// by at most half that round trip, however slow the others were. A
// shortest round trip longer than the skew tolerance (Redis stalled or
// overloaded while it measured) does not count: two replicas so
// corrected could disagree by more than the tolerance. A failed
// measurement keeps the last offset, if any, and is logged at Warn once
// until one succeeds.
func (s *Scheduler) measureOffset(rc redisClock) {
	ctx, cancel := context.WithTimeout(s.life, time.Second)
	defer cancel()
	var off time.Duration
	best := time.Duration(-1) // the shortest round trip so far
	var err error
	for range offsetSamples {
		before := s.cfg.clock()
		var redisNow time.Time
		if redisNow, err = rc.Time(ctx); err != nil {
			break
		}
		if rtt := s.cfg.clock().Sub(before); best < 0 || rtt < best {
			best, off = rtt, redisNow.Sub(before.Add(rtt/2))
		}
	}
	switch {
	case best < 0:
		s.measureFailed(slog.Any("error", err))
		return
	case best > s.cfg.tolerance:
		s.measureFailed(slog.String("error", "round trips too slow to place Redis's time within the skew tolerance"),
			slog.Duration("round_trip", best), slog.Duration("tolerance", s.cfg.tolerance))
		return
	}
	s.offset.Store(int64(off))
	s.measured.Store(true)
	s.measureFailing.Store(false)
	if off > s.cfg.tolerance || off < -s.cfg.tolerance {
		s.cfg.logger.LogAttrs(ctx, slog.LevelError, "cronlock: this host's clock is off Redis's by more than the skew tolerance; cronlock keeps time by Redis's, but the clock needs fixing",
			slog.Duration("offset", off), slog.Duration("tolerance", s.cfg.tolerance))
	}
}

// measureFailed logs a failed measurement, once until one succeeds.
func (s *Scheduler) measureFailed(attrs ...slog.Attr) {
	if s.measureFailing.Swap(true) {
		return
	}
	msg := "cronlock could not read Redis's clock; it keeps the last offset"
	if !s.measured.Load() {
		msg = "cronlock could not read Redis's clock; it runs no tick until it can (measureFailing every second)"
	}
	s.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
}
