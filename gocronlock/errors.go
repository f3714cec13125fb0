package gocronlock

import "errors"

// Errors a [Locker]'s Lock returns when this replica skips a run; gocron
// then skips it and hands the error to the job's AfterLockError listener.
// Redis errors are returned as they are (see [OutcomeFailed]).
var (
	// ErrHeld: the job's run lock is held by a run of an earlier tick,
	// on this replica or another, that has not ended: this tick runs on
	// no replica that fires while it lasts.
	ErrHeld = errors.New("gocronlock: the job's previous run still holds it")
	// ErrTickDone: another replica took this tick, less than the minimum
	// hold ago, and runs it or ran it.
	ErrTickDone = errors.New("gocronlock: another replica took this tick")
)

// ErrNotLeader is what [Elector.IsLeader] returns while this replica does
// not lead: gocron then skips the run.
var ErrNotLeader = errors.New("gocronlock: this replica does not lead")

// ErrNoRun is what a function made by [Locker.Func] returns, without
// running, when gocron called it with no run lock of this Locker: the job
// was not locked with it (WithDisabledDistributedJobLocker, another
// Locker, or an Elector instead).
var ErrNoRun = errors.New("gocronlock: the job runs without this Locker's run lock")
