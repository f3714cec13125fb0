package gocronlock

import "time"

// Outcome is how one run attempt of a job on one replica ended.
type Outcome int

// Outcomes of a run attempt, with the level they are logged at.
const (
	// OutcomeRan: this replica took the run and gocron unlocked it, with
	// the run lock kept and no error from the job through [Locker.Func]
	// (Info). gocron also unlocks, without calling the job, when a
	// BeforeJobRunsSkipIfBeforeFuncErrors listener fails: that attempt
	// is reported ran too, and its marker skips the run on the other
	// replicas.
	OutcomeRan Outcome = iota + 1
	// OutcomeSkippedHeld: a run of an earlier tick still held the job;
	// Lock returned [ErrHeld] (Warn).
	OutcomeSkippedHeld
	// OutcomeSkippedTickDone: another replica took this tick; Lock
	// returned [ErrTickDone] (Debug: the usual outcome on all replicas
	// but one).
	OutcomeSkippedTickDone
	// OutcomeFailed: a Redis call of Lock failed or outlasted the lock
	// budget ([WithLockBudget]) or ctx's deadline (Lock returned the
	// error, and the tick may have run nowhere), or the job, run through
	// [Locker.Func] or [Locker.Task], returned an error. [Attempt.Err]
	// tells which (Error).
	OutcomeFailed
	// OutcomeLost: the run lock was lost while the job ran (its lease
	// ended in Redis, or the lock Client was closed): the run's context,
	// as [Locker.Func] passes it, ended with cause [lock.ErrLost] or
	// [lock.ErrClosed], and another replica may have run the job at the
	// same time (Error).
	OutcomeLost
	// OutcomeStopped: gocron's job context ended while Lock ran (the
	// scheduler shut down, or the job was removed or updated); Lock
	// returned the context's error and nothing ran (Info).
	OutcomeStopped
)

var outcomeNames = [...]string{"", "ran", "skipped-held", "skipped-tick-done", "failed", "lost", "stopped"}

// String returns the outcome's name, e.g. "skipped-tick-done".
func (o Outcome) String() string {
	if o <= 0 || int(o) >= len(outcomeNames) {
		return "unknown"
	}
	return outcomeNames[o]
}

// Attempt describes one run attempt of a job on one replica.
type Attempt struct {
	Job     string // the job's name, as gocron passed it to Lock
	Outcome Outcome
	// Err is why the attempt was skipped, failed or lost: [ErrHeld],
	// [ErrTickDone], a Redis error, the job's error, or the run lock's
	// loss (matching [lock.ErrLost] or [lock.ErrClosed]); nil for a run.
	Err      error
	MinHold  time.Duration // the minimum hold the attempt's marker had or would have had
	Duration time.Duration // how long the run lock was held; 0 when not taken
	Token    uint64        // fencing token of the run lock; 0 when not taken
}

// report logs a at its outcome's level and hands it to the callback.
func (l *Locker) report(a Attempt) {
	args := []any{"job", a.Job, "outcome", a.Outcome.String(), "min_hold", a.MinHold}
	if a.Token != 0 {
		args = append(args, "duration", a.Duration, "token", a.Token)
	}
	if a.Err != nil {
		args = append(args, "error", a.Err)
	}
	const msg = "gocronlock: run attempt"
	switch a.Outcome {
	case OutcomeRan, OutcomeStopped:
		l.cfg.logger.Info(msg, args...)
	case OutcomeSkippedTickDone:
		l.cfg.logger.Debug(msg, args...)
	case OutcomeSkippedHeld:
		l.cfg.logger.Warn(msg, args...)
	default:
		l.cfg.logger.Error(msg, args...)
	}
	if l.cfg.onAttempt != nil {
		l.cfg.onAttempt(a)
	}
}
