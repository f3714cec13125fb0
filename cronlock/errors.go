package cronlock

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every error about a bad argument to [New],
	// [Scheduler.AddFunc] or [Scheduler.AddJob]: a nil cron or Locker, an
	// empty, duplicate or oversized job name, a nil job, a spec the cron
	// cannot parse or that ticks too often for the skew tolerance, or a
	// duration that is zero, negative or out of order.
	ErrInvalid = errors.New("cronlock: invalid argument")

	// ErrStopped is returned by [Scheduler.AddFunc] and [Scheduler.AddJob]
	// after [Scheduler.Stop], and is the cause of the contexts of runs that
	// Stop cancelled when its grace period ended.
	ErrStopped = errors.New("cronlock: scheduler stopped")

	// ErrUnknownJob is returned by [Scheduler.Update], [Scheduler.Remove]
	// and [Scheduler.RunNow] for a name no job of the Scheduler has.
	ErrUnknownJob = errors.New("cronlock: unknown job")

	// ErrAtMostFor is the cause of a run's context that was cancelled
	// because the run reached its [AtMostFor] limit.
	ErrAtMostFor = errors.New("cronlock: run reached its AtMostFor limit")

	// ErrPanicked is wrapped by the error of a run whose job panicked. The
	// error's text carries the panic value and the stack.
	ErrPanicked = errors.New("cronlock: job panicked")

	// ErrOtherSpec is wrapped by the error of an attempt that found the
	// tick marker held for a tick this replica's spec does not have
	// ([OutcomeSkippedOtherSpec]): replicas register the job with
	// different specs, as during a rolling deploy that changes it.
	ErrOtherSpec = errors.New("cronlock: the tick marker is held for a tick of another spec")

	// ErrClockSkew is wrapped by the error of an attempt of a replica on
	// its own clock that found the tick marker held for a tick that is
	// not one of its own by its clock ([OutcomeSkippedSkew]): the
	// replicas' clocks are further apart than the skew tolerance, or they
	// run the job on different specs.
	ErrClockSkew = errors.New("cronlock: the tick marker is held for a tick this replica's clock does not have")
)

// ErrClockUnknown is the error of an attempt that a replica keeping
// time by Redis's clock skipped because it does not know its clock's
// offset to Redis's yet: Redis's TIME could not be read at
// [Scheduler.Start] and since (see [Scheduler.ClockOffset]), or the cron
// was started by its own Start rather than the Scheduler's. By its own
// clock it cannot tell which tick another replica runs, so it runs none
// ([OutcomeFailed]) until a measurement succeeds; it tries again every
// second.
var ErrClockUnknown = errors.New("cronlock: this replica's clock offset to Redis's is unknown (Redis's TIME could not be read, or Scheduler.Start was not called): it runs no tick until it is measured")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
