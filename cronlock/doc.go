// Package cronlock runs [github.com/robfig/cron/v3] jobs once per tick
// across replicas: every replica runs the same binary with the same
// schedule, each scheduled time runs on at most one of them, and runs of
// a job never overlap.
//
// Wrap the cron, add jobs by name, start:
//
//	locker, err := lock.New(rdb) // one lock.Client per process
//	if err != nil { ... }
//	defer locker.Close()
//
//	c := cron.New(cron.WithSeconds()) // the cron keeps its own options
//	s := cronlock.New(c, locker)
//	_, err = s.AddFunc("0 */5 * * * *", "cleanup", func(ctx context.Context) error {
//		return cleanup(ctx) // ctx is cancelled if the run's lock is lost
//	}, cronlock.AtMostFor(10*time.Minute))
//	if err != nil { ... }      // bad spec, duplicate name, ...
//	s.Start()
//	defer func() { <-s.Stop().Done() }() // lets runs finish, then releases
//
// # Once per tick
//
// Replicas that share a Redis and a job name form one job. They keep time
// by Redis's clock: with a [lock.Client] as the Locker, a Scheduler
// measures how far its host's clock is off Redis's (TIME, over the
// shortest of three round trips) when it starts and every 30 s
// ([Scheduler.ClockOffset]), and fires and works out ticks
// by its clock corrected by that offset. A replica that has no offset yet
// (Redis's TIME could not be read at Start) runs no tick, since by its own
// clock it cannot tell which tick another replica runs: it reports each
// as [OutcomeFailed] with [ErrClockUnknown] and measures again every
// second. At every tick each replica's cron fires, and each replica:
//
//  1. works out the tick, the scheduled time it fires for, by its clock;
//  2. takes the job's tick marker with [lock.Locker.TryLock], or skips with
//     [OutcomeSkippedTickDone] when another replica has it. The holder
//     releases the marker hold = min(4 × skew tolerance, 7/8 period) after
//     the tick, where period is the time to the next tick. A replica that
//     would get the marker more than hold - skew tolerance after the tick
//     by its own clock skips with [OutcomeSkippedLate]: by then the holder
//     may have let go of it;
//  3. takes the job's run lock, or skips with [OutcomeSkippedHeld] when the
//     previous run still holds it: that tick then runs nowhere;
//  4. runs the job with the run lock's context and releases the lock.
//
// The guarantee: when the replicas' clocks, as corrected, are within the
// skew tolerance of each other (500 ms by default, [WithSkewTolerance]),
// no tick runs twice, however late a replica's cron fires or Redis
// answers. With a lock.Client that holds whatever the hosts' clocks say,
// as long as none drifts by the tolerance within 30 s and Redis's clock
// does not jump (tested: one replica 2 s behind, one 2.5 s ahead, an
// "@every 1s" and a daily job, no tick run twice; also when they start
// while Redis is stalled). With a Locker that
// cannot tell Redis's time, the hosts' clocks themselves must be within
// the tolerance. A job every second may so be 375 ms late by default, a
// job every 2 s or slower 1 s or more. It is not a guarantee of at least
// once: a tick that every replica is too late for, a replica that takes a
// tick and crashes, or a Redis that cannot be reached, loses the tick. An
// offset beyond the tolerance is logged at Error: the correction copes
// with it, but the host's clock needs fixing.
//
// "@every d" specs are aligned to multiples of d, so that replicas started
// at different times share their ticks (see [Scheduler.AddFunc]).
//
// # Time zones and daylight saving
//
// cronlock runs what the cron fires. For a spec in a zone with daylight
// saving time, robfig/cron fires twice for times of day in the hour that
// repeats when clocks go back, and skips times of day in the hour that
// does not exist when they go forward; each of those firings is a tick of
// its own to cronlock. Write once-a-day jobs in UTC (cron.WithLocation
// (time.UTC), or a "CRON_TZ=UTC " prefix on the spec) unless running at a
// local time of day matters more than running exactly once a day.
//
// # Job names
//
// A job is its name on a Redis and key prefix: replicas that share both
// and add the same name are one job, whatever service they belong to.
// Give each service its own prefix (lock.WithPrefix on its [lock.Client])
// so that two services' "cleanup" jobs stay two jobs.
//
// # Bounds
//
// Without options the run lock's lease is the Locker's default (30 s),
// renewed by its watchdog while the run lasts: a crashed replica frees the
// job within one lease. [AtMostFor] caps a run instead: a fixed lease,
// and a deadline on the run's context. [AtLeastFor] keeps the run lock for
// a while after a short run.
//
// # Outcomes
//
// Every run attempt ends with an [Outcome]: ran, skipped-held,
// skipped-tick-done, skipped-late, failed (with the error), lost, stopped
// (cancelled by [Scheduler.Stop], logged at Warn: a deploy is not a
// failure), skipped-other-spec or skipped-skew. The tick marker's lease
// ends a set time after its tick, which tells the others which tick it was
// taken for. A replica that finds it held for a tick its spec does not
// have reports, on Redis's time, skipped-other-spec: replicas run the job
// on different specs (a rolling deploy that changes it) and this tick runs
// nowhere; on its own clock, where it cannot tell a clock off by more than
// the skew tolerance from another spec, skipped-skew (both logged at
// Error, with that tick). Each is logged with [log/slog] ([WithLogger]),
// job names cut to 200 bytes, and handed to the callback set with
// [WithOnAttempt].
//
// # Redis data
//
// For job name N the Scheduler locks the keys "cronlock:run:N" and
// "cronlock:tick:N" with the Locker, which adds its prefix. Each lock key
// keeps a fencing hash in Redis for good (about 136 bytes): two per job
// name, whatever the number of ticks. Both locks carry one telemetry name,
// "cronlock:N" ([lock.WithName]); the tick marker is marked
// [lock.Integration.Internal].
package cronlock
