package cronlock

import (
	"context"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// run is what a run's context carries.
type run struct {
	key    string // the run lock's key
	tick   time.Time
	noTick bool // a RunNow while the Scheduler's time was unknown
}

type runKey struct{}

// FencingToken returns the fencing token of the run lock that ctx, a
// job's run context or one derived from it, holds, and whether it still
// holds it (see [lock.FencingToken]). Tokens strictly increase from run to
// run of a job across all replicas; pass them to storage that rejects
// writes from a run whose lock was lost.
func FencingToken(ctx context.Context) (uint64, bool) {
	r, ok := ctx.Value(runKey{}).(run)
	if !ok {
		return 0, false
	}
	return lock.FencingToken(ctx, r.key)
}

// Tick returns the scheduled time the run of ctx is for, by the
// Scheduler's clock (corrected by Redis's, see [Scheduler.ClockOffset]),
// and whether ctx is a job's run context, or derives from one, that has a
// tick. A [Scheduler.RunNow] run's tick is the time of the RunNow call;
// it has none (zero time, false) when the Scheduler does not know Redis's
// time yet (before [Scheduler.Start], or while Redis's TIME cannot be
// read). Use it to make a job idempotent, e.g. "invoices of the day
// before Tick".
func Tick(ctx context.Context) (time.Time, bool) {
	r, ok := ctx.Value(runKey{}).(run)
	return r.tick, ok && !r.noTick
}
