package cronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// marker is the tick marker of a job name on this replica: whether it
// holds it, and whether a marker command of its own that Redis did not
// answer in time may hold it.
type marker struct {
	mu   sync.Mutex
	due  time.Time // when this replica lets go of it
	free func()    // lets go of it; nil when it holds none

	// A marker command cut off by the lateness bound may still run in
	// Redis, late, when a stalled Redis resumes, and take the marker for
	// the cut-off attempt; the Locker releases it soon after, but the
	// next tick may find it held. lateLease is the longest fixed lease
	// such commands asked for (0: none pending); answered is when Redis
	// first answered a marker command after them (zero: not yet). By then
	// the late commands have run, so such a marker is gone lateLease
	// after answered at the latest.
	lateLease time.Duration
	answered  time.Time
}

// markerRetry is how long an attempt that finds the marker held, maybe by
// its own replica's cut-off command, waits before it tries again.
const markerRetry = 50 * time.Millisecond

// errOwnLateMarker is the error of an attempt that found the tick marker
// held until its lateness bound while it may be this replica's own: an
// earlier attempt's command that Redis did not answer in time and ran
// late. The tick may have run nowhere: a Redis failure, not a tick done.
var errOwnLateMarker = fmt.Errorf("cronlock: the tick marker is held, maybe by this replica's own earlier attempt that Redis did not answer in time and ran late; the tick may have run nowhere: %w", context.DeadlineExceeded)

// takeMarker takes the marker of a's tick, hold after which it is let go
// of, by late. When it cannot, it returns a with the outcome: skipped
// when another replica holds the marker; failed when Redis did not answer
// in time, or when the marker stays held until late while it may be held
// by this replica's own late command (then it tries again every
// markerRetry meanwhile, as the Locker releases such a marker soon after
// Redis answers again).
func (e *entry) takeMarker(a Attempt, hold time.Duration, late time.Time) (lock.UnlockFunc, Attempt, bool) {
	s, m := e.s, e.marker
	for {
		now := s.now()
		// The marker's lease ends markerLease after the tick, by the
		// Scheduler's clock, so that another replica can tell from what
		// is left of it which tick it was taken for (see otherSpec).
		lease := a.Tick.Add(markerLease(hold)).Sub(now)
		// Each Redis call of the attempt is bounded by the tick's lateness
		// bound: an answer after it could not be trusted anyway.
		// Bookkeeping, not the job's work: observers record no trace of it.
		_, unlock, err := s.locker.TryLock(context.Background(), e.tickKey,
			named(e.name, lock.WithFixedLease(lease), lock.WithMaxWait(max(late.Sub(now), minBound)), lock.Integration{}.Internal())...)
		switch {
		case err == nil:
			m.settle(s.now(), true)
			return unlock, a, true
		case errors.Is(err, lock.ErrNotObtained) && errors.Is(err, context.DeadlineExceeded):
			m.cutOff(lease)
			return nil, a.notObtained(err, OutcomeSkippedTickDone), false
		case !errors.Is(err, lock.ErrNotObtained) || errors.Is(err, context.Canceled):
			return nil, a.notObtained(err, OutcomeSkippedTickDone), false
		}
		m.settle(s.now(), false)
		if !m.mayHoldOwn(s.now()) {
			return nil, e.refused(a, err, hold, now), false
		}
		if s.now().Add(markerRetry).After(late) {
			a.Outcome, a.Err = OutcomeFailed, errOwnLateMarker
			return nil, a, false
		}
		t := time.NewTimer(markerRetry)
		select {
		case <-t.C:
		case <-s.life.Done():
			t.Stop()
			a.Outcome, a.Err = OutcomeStopped, ErrStopped
			return nil, a, false
		}
	}
}

// refused returns a with the outcome of a refusal of the marker (err, to
// a command sent at sent) by another replica's hold.
func (e *entry) refused(a Attempt, err error, hold time.Duration, sent time.Time) Attempt {
	other, ok := e.otherSpec(err, hold, sent)
	if !ok {
		return a.notObtained(err, OutcomeSkippedTickDone)
	}
	if _, redisTime := clockOf(e.s.locker); redisTime {
		// Its clock agrees with the others': they are on Redis's too, or
		// run no tick (see timeKnown).
		a.Outcome = OutcomeSkippedOtherSpec
		a.Err = fmt.Errorf("%w: the marker of job %s was taken for a tick at %s, which spec %q does not have; do the replicas run the job on different specs?",
			ErrOtherSpec, loggedName(e.name), other.UTC().Format(time.RFC3339Nano), e.spec)
		return a
	}
	a.Outcome = OutcomeSkippedSkew
	a.Err = fmt.Errorf("%w: the marker of job %s was taken for a tick at %s by this replica's clock, %v from its tick %s: the replicas' clocks are further apart than the skew tolerance %v (this replica keeps its own clock: its Locker cannot tell Redis's time), or they run the job on different specs",
		ErrClockSkew, loggedName(e.name), other.UTC().Format(time.RFC3339Nano), a.Tick.Sub(other).Round(time.Millisecond), a.Tick.UTC().Format(time.RFC3339Nano), e.s.cfg.tolerance)
	return a
}

// cutOff records a marker command with a fixed lease that Redis did not
// answer in time.
func (m *marker) cutOff(lease time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lateLease = max(m.lateLease, lease)
	m.answered = time.Time{}
}

// settle records that Redis answered a marker command at now: took tells
// that it took the marker, so no late command of this replica holds it.
func (m *marker) settle(now time.Time, took bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case took:
		m.lateLease, m.answered = 0, time.Time{}
	case m.lateLease > 0 && m.answered.IsZero():
		m.answered = now
	}
}

// mayHoldOwn tells whether a late command of this replica may hold the
// marker at now.
func (m *marker) mayHoldOwn(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lateLease > 0 && !m.answered.IsZero() && now.After(m.answered.Add(m.lateLease+minBound)) {
		m.lateLease, m.answered = 0, time.Time{}
	}
	return m.lateLease > 0
}

// holdMarker arranges for the marker just taken to be let go of at due,
// by the Scheduler's clock.
func (e *entry) holdMarker(due time.Time, unlock lock.UnlockFunc) {
	free := e.s.releaseAfter(due.Sub(e.s.now()), e.tickKey, unlock)
	m := e.marker
	m.mu.Lock()
	defer m.mu.Unlock()
	m.due, m.free = due, free
}

// dueBy makes the marker due at t at the latest.
func (m *marker) dueBy(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !t.IsZero() && t.Before(m.due) {
		m.due = t
	}
}

// letGoOfMarker lets go of the marker this replica holds if it is due by
// now, without waiting for the timer: at its next tick the holder must
// find the marker free, however busy the machine.
func (e *entry) letGoOfMarker(now time.Time) {
	m := e.marker
	m.mu.Lock()
	free := m.free
	if free == nil || now.Before(m.due) {
		m.mu.Unlock()
		return
	}
	m.free = nil
	m.mu.Unlock()
	free()
}
