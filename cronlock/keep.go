package cronlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// keep keeps the run lock, just used by a run, until end (by the system
// clock, the run's start plus [AtLeastFor]) and releases it then; at once
// when end has passed.
//
// At Stop it does not wait for end, nor leave the lock to its lease (the
// Locker's 30 s by default, far beyond the window): it hands the rest of
// the window to Redis (see handOver), so that the lock ends at end on
// every replica's view, whether this process lives on or not.
func (e *entry) keep(end time.Time, unlock lock.UnlockFunc) {
	s := e.s
	d := time.Until(end)
	if d <= 0 {
		s.logRelease(e.runKey, unlock())
		return
	}
	s.timers.Add(1)
	go func() {
		defer s.timers.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			s.logRelease(e.runKey, unlock())
		case <-s.life.Done():
			e.handOver(end, unlock)
		}
	}()
}

// handOver ends a kept run lock at Stop with a lease of what is left of
// its window: it releases the hold and takes the key again with a fixed
// lease ending at end, which nobody renews. Between the two calls the key
// is free for the time of one round trip; a replica that takes it then
// runs the job within the window, which AtLeastFor is meant to prevent,
// but only a RunNow can come at that moment (the window ends before the
// next tick). When less than [lock.MinLease] is left, or the release
// failed, it only releases.
//
// The new hold is released a drift allowance before end, so that its
// lease never lapses in the Locker's view (which would be reported as a
// lost lock); the goroutine that does so ends then, or when the Locker is
// closed, which releases the hold earlier. Stop does not wait for it.
func (e *entry) handOver(end time.Time, unlock lock.UnlockFunc) {
	s := e.s
	err := unlock()
	s.logRelease(e.runKey, err)
	left := time.Until(end)
	if err != nil || left < lock.MinLease {
		return
	}
	held, release, err := s.locker.TryLock(context.Background(), e.runKey,
		named(e.name, lock.WithFixedLease(left), lock.WithMaxWait(time.Second))...)
	if errors.Is(err, lock.ErrClosed) {
		return // closing the Locker released the key
	}
	if err != nil {
		s.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "cronlock could not keep the run lock for the rest of its AtLeastFor window at Stop",
			slog.String("job", loggedName(e.name)), slog.Duration("left", left), slog.Any("error", err))
		return
	}
	go func() {
		t := time.NewTimer(left - left/50 - 5*time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			s.logRelease(e.runKey, release())
		case <-held.Done():
		}
	}()
}
