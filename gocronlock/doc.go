// Package gocronlock runs [github.com/go-co-op/gocron/v2] jobs once per
// scheduled run across replicas, on lockkit locks: a [Locker] for
// gocron.WithDistributedLocker (or WithDistributedJobLocker) and an
// [Elector] for gocron.WithDistributedElector.
//
// Every replica runs the same binary with the same jobs, by the same
// names (gocron.WithName: gocron locks a job by its name, and a job
// without one is named after its function):
//
//	client, err := lock.New(rdb) // one lock.Client per process
//	if err != nil { ... }
//	defer client.Close()
//	locker, err := gocronlock.NewLocker(client)
//	if err != nil { ... }
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//	if err != nil { ... }
//	locker.DeriveHolds(s) // minimum holds from the jobs' schedules
//	_, err = s.NewJob(gocron.CronJob("0 */5 * * * *", true),
//		locker.Task(func(ctx context.Context) error {
//			return cleanup(ctx) // ctx ends if the run lock is lost
//		}),
//		gocron.WithName("cleanup"))
//	if err != nil { ... }
//	s.Start()
//	defer s.Shutdown() // before client.Close
//
// # Once per scheduled run
//
// gocron hands a Locker only the job's name, not which run is due, and
// each replica fires by its own clock: a lock released when the run ends
// is free again when a replica whose clock is behind, or that started
// later, fires for the same run, and the job runs twice. So a run takes
// two locks, in this order, when gocron's Lock is called:
//
//  1. the run lock, "gocronlock:run:N" for job N, with [lock.Locker.TryLock]
//     and a lease the watchdog renews ([WithLease]), held until the run
//     ends: runs of a job never overlap. When it is held, the attempt is
//     skipped with [ErrHeld] (a run of an earlier tick still holds it),
//     or with [ErrTickDone] when the marker is held too (its holder took
//     this tick; read with Inspect when the Locker is a [lock.Client]);
//  2. the tick marker, "gocronlock:tick:N", with TryLock, held for the
//     job's minimum hold from the time it is taken (ShedLock's
//     lockAtLeastFor), whenever the run ends: the replica releases it
//     then, and its fixed lease, an eighth and 50 ms longer, ends it
//     when the replica crashed. When another replica holds it, the
//     attempt releases the run lock and is skipped with [ErrTickDone].
//
// The guarantee: no scheduled run of a job runs on two replicas when the
// replicas fire for it less than the minimum hold apart (clock skew, the
// offset between the starts of DurationJobs, and firing delays, by real
// time), and fire for successive runs more than the minimum hold apart.
// Why: the marker's lease is measured by Redis. The first replica to fire
// takes both locks and the marker; a replica that fires for the same run
// less than the minimum hold later finds the run lock held (and the
// marker) or the marker held, and skips; the next run is due an interval
// later, when the marker has been released. Only a holder of the run lock
// takes the marker, so a held marker means that a replica took the run:
// a run that ran nowhere is never reported done elsewhere, unless its
// replica crashed or lost its run lock right after taking it (see
// [OutcomeLost]). The other way round, a replica that finds the run lock
// held by a replica that has not yet taken the marker reports
// [ErrHeld] for a run that does run there.
//
// With the default minimum hold of half the job's interval (the shortest
// gap between its runs, see [Locker.DeriveHolds]) both conditions hold
// when the replicas fire for one run less than half the interval apart,
// firing delays and Redis round trips included: clocks within 500 ms,
// less those, for a job every second; within 12 h for a daily one.
// Without DeriveHolds the minimum hold is [DefaultMinHold] (500 ms)
// unless set with [WithMinHold]: right for jobs every second or slower
// and clocks within 500 ms less the firing delays. For a DurationJob,
// each replica counts its runs from its own start: start the replicas'
// jobs at times that agree on the phase (gocron.WithStartAt at a
// multiple of the interval), or within half the interval of each other.
// The minimum hold is real time: with a fake clock (gocron.WithClock), set
// WithMinHold to the real time between firings. A run started with
// gocron's RunNow is a run like any other: it takes the marker, and a
// scheduled run due less than the minimum hold later is skipped on every
// replica with ErrTickDone.
//
// A Redis round trip counts towards how far apart the replicas fire: a
// replica whose Lock reaches Redis late, a Redis that stalls, can find
// the marker of a replica that fired less than the minimum hold before
// it gone, and run that tick again. [WithLockBudget] bounds the time
// Lock may take, failing the attempt beyond it, so that the guarantee
// holds, whatever Redis does, when the replicas fire less than the
// minimum hold less the budget apart (and for successive runs more than
// the minimum hold plus the budget).
//
// It is not a guarantee of at least once: a run that finds the job held
// by a run of an earlier tick is skipped on every replica; a replica that
// crashes does not hand its run over, and its marker lapses up to an
// eighth of the hold and 50 ms late, which skips the next run when the
// replicas fire that close to the bound; and a Redis that cannot be
// reached, or answers after the lock budget, fails the attempt.
//
// Shut the scheduler down before closing the lock.Client. Close releases
// the markers the Client holds: a replica that fires for a run after
// another replica ran it and closed its Client within the minimum hold
// runs it again. Let a replica that stops wait out the firing spread
// (the clock skew and start offsets) after its scheduler's Shutdown
// before it closes the Client.
//
// # Runs and their context
//
// gocron passes a job function its job's context, which does not end when
// the run lock is lost. [Locker.Task] (or gocron.NewTask of [Locker.Func])
// passes the run lock's context instead: it ends when the job's context
// does or the run lock is lost (cause [lock.ErrLost]; [lock.ErrClosed]
// when the Client is closed), and carries the run lock's fencing token
// ([lock.FencingToken] of the context and "gocronlock:run:" + the job's
// name, with the default prefix) for the job's writes.
//
// # Outcomes
//
// Every attempt ends with an [Outcome]: ran, skipped-held,
// skipped-tick-done, failed (a Redis error, or the job's error through
// Func), lost, stopped (gocron ended the job's context during Lock). It is logged ([WithLogger]: a *slog.Logger or a
// gocron.Logger) and handed to [WithOnAttempt]. Lock returns [ErrHeld],
// [ErrTickDone] or the Redis error, which gocron hands to the job's
// AfterLockError listener: tell them apart with [errors.Is].
//
// # Leader
//
// An [Elector] runs a [leader.Election] in the background between Start
// and Close: the replica that leads runs all jobs of a scheduler made with
// gocron.WithDistributedElector, from its local leadership state (no Redis
// call per run). Its guarantees are the election's. A job function
// wrapped with [Elector.Func] runs with a context that ends when
// leadership is lost (cause [lock.ErrLost]) or the Elector closes.
//
// # Redis data
//
// Job N locks the keys prefix+":run:N" and prefix+":tick:N" ([WithKeyPrefix],
// default "gocronlock"), under the lock Client's prefix; each keeps a
// fencing hash in Redis for good: two per job name.
package gocronlock
