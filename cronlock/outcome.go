package cronlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/lockkit/lockkit/lock"
)

// Outcome is how one run attempt of a job on one replica ended.
type Outcome int

// Outcomes of a run attempt, with the level of their log record.
const (
	// OutcomeRan: this replica ran the job, which returned nil (Info).
	OutcomeRan Outcome = iota + 1
	// OutcomeSkippedHeld: this replica took the tick, but the job's
	// previous run (on any replica) still held the job, so the tick does
	// not run anywhere (Warn).
	OutcomeSkippedHeld
	// OutcomeSkippedTickDone: another replica had already taken the tick,
	// or, when this replica's clock is ahead, still kept the previous
	// tick's marker; the tick runs on another replica (Debug: the usual
	// outcome on all replicas but one). A marker that this replica's own
	// earlier attempt may hold (its command, which Redis did not answer
	// in time, ran late) is not taken for another replica's: the attempt
	// tries again until its lateness bound, then fails.
	OutcomeSkippedTickDone
	// OutcomeSkippedLate: this replica fired, or got the tick's marker, so
	// late after the tick (see [WithSkewTolerance]) that another replica
	// may have run it and let go of it; the run is skipped rather than
	// risk running the tick twice (Warn).
	OutcomeSkippedLate
	// OutcomeFailed: the job returned an error, panicked or reached its
	// [AtMostFor] limit, or a Redis call failed before it could start,
	// also by not answering before the tick's lateness bound (a stalled
	// Redis: the error then matches [context.DeadlineExceeded], also when
	// the marker stayed held by what may be this replica's own late
	// command), or the replica's clock offset to Redis is unknown
	// ([ErrClockUnknown]) (Error).
	// [Attempt.Err] tells which.
	OutcomeFailed
	// OutcomeLost: the job's run lock was lost while it ran, before any
	// AtMostFor limit, or the Locker was closed; the run may have
	// overlapped another (Error).
	OutcomeLost
	// OutcomeStopped: [Scheduler.Stop]'s grace period ended while the job
	// ran, and its context was cancelled with cause [ErrStopped]: a
	// deploy, not a failure (Warn).
	OutcomeStopped
	// OutcomeSkippedOtherSpec: another replica holds the tick marker for a
	// tick that is not one of this replica's spec, so this tick runs
	// nowhere: the replicas run the job on different specs. Only a replica
	// that keeps time by Redis's clock reports it: its clock agrees with
	// the others' (see [Scheduler.ClockOffset]). [Attempt.Err] wraps
	// [ErrOtherSpec] and names the other tick (Error).
	OutcomeSkippedOtherSpec
	// OutcomeSkippedSkew: as OutcomeSkippedOtherSpec, reported by a
	// replica on its own clock (its Locker cannot tell Redis's time): the
	// marker is held for a tick that is not one of its own by its clock,
	// most likely the same tick on a replica whose clock is further off
	// than the skew tolerance; or the replicas run different specs. The
	// tick runs on that replica or nowhere. [Attempt.Err] wraps
	// [ErrClockSkew] and names the other tick and how far it is (Error:
	// the clocks need fixing).
	OutcomeSkippedSkew
)

var outcomeNames = [...]string{"", "ran", "skipped-held", "skipped-tick-done", "skipped-late", "failed", "lost", "stopped", "skipped-other-spec", "skipped-skew"}

// String returns the outcome's name, e.g. "skipped-tick-done".
func (o Outcome) String() string {
	if o <= 0 || int(o) >= len(outcomeNames) {
		return "unknown"
	}
	return outcomeNames[o]
}

func (o Outcome) level() slog.Level {
	switch o {
	case OutcomeRan:
		return slog.LevelInfo
	case OutcomeSkippedTickDone:
		return slog.LevelDebug
	case OutcomeSkippedHeld, OutcomeSkippedLate, OutcomeStopped:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// Attempt describes one run attempt of a job on one replica.
type Attempt struct {
	Job     string    // the job's name
	Tick    time.Time // the scheduled time the attempt is for (RunNow: the time of the call); zero when skipped late with no tick within a period, and while the offset to Redis's time is unknown ([ErrClockUnknown]; RunNow)
	Outcome Outcome
	// Err is why the attempt failed or the run was lost, nil otherwise.
	// Errors of runs that were cancelled match the context's cause with
	// [errors.Is]: [ErrAtMostFor], [ErrStopped], [lock.ErrLost].
	Err      error
	Duration time.Duration // how long the job ran; 0 when it did not run
	Token    uint64        // fencing token of the run lock; 0 when it was not taken
}

// maxLoggedName is how much of a job name a log record carries.
const maxLoggedName = 200

// loggedName is name, cut to maxLoggedName bytes (at a UTF-8 boundary)
// with its full length noted: a name may be up to MaxNameLen bytes.
func loggedName(name string) string {
	if len(name) <= maxLoggedName {
		return name
	}
	cut := maxLoggedName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", name[:cut], len(name))
}

// report logs a and hands it to the callback.
func (s *Scheduler) report(a Attempt) {
	attrs := []slog.Attr{slog.String("job", loggedName(a.Job)), slog.String("outcome", a.Outcome.String())}
	if !a.Tick.IsZero() {
		attrs = append(attrs, slog.Time("tick", a.Tick))
	}
	if a.Token != 0 {
		attrs = append(attrs, slog.Duration("duration", a.Duration), slog.Uint64("token", a.Token))
	}
	if a.Err != nil {
		attrs = append(attrs, slog.Any("error", a.Err))
	}
	s.cfg.logger.LogAttrs(context.Background(), a.Outcome.level(), "cronlock run", attrs...)
	if s.cfg.onAttempt != nil {
		s.cfg.onAttempt(a)
	}
}

// logRelease logs an unlock that failed for another reason than a lease
// that already ended: the lease then lapses by itself.
func (s *Scheduler) logRelease(key string, err error) {
	if err == nil || errors.Is(err, lock.ErrLost) {
		return
	}
	s.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "cronlock release failed; the lease will lapse",
		slog.String("key", loggedName(key)), slog.Any("error", err))
}
