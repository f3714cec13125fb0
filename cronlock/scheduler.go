package cronlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/lock"
)

// Job is a unit of work that [Scheduler.AddJob] runs on schedule. Run
// gets the run's context (see [Scheduler.AddFunc]); its error is reported
// as the run's outcome.
type Job interface {
	Run(ctx context.Context) error
}

type jobFunc func(ctx context.Context) error

func (f jobFunc) Run(ctx context.Context) error { return f(ctx) }

// Redis lock keys of a job, passed to the Locker (which adds its prefix).
const (
	runKeyPrefix  = "cronlock:run:"
	tickKeyPrefix = "cronlock:tick:"
)

// MaxNameLen is the longest job name accepted, in bytes.
const MaxNameLen = lock.MaxKeyLen - len(tickKeyPrefix)

// Scheduler runs jobs on a [cron.Cron] so that each scheduled tick runs
// once across all replicas that share the Locker's Redis. It is safe for
// concurrent use. Create it with [New].
type Scheduler struct {
	c      *cron.Cron
	locker lock.Locker
	cfg    config
	err    error // from New: returned by AddFunc and AddJob

	// life is the parent of every run's context; Stop cancels it with
	// ErrStopped when the grace period ends.
	life context.Context
	kill context.CancelCauseFunc

	mu      sync.Mutex
	jobs    map[string]*entry  // by name
	markers map[string]*marker // by name, kept after Remove: a re-added job lets go of its marker in time
	stopped bool
	started bool
	wg      sync.WaitGroup // runs in progress
	timers  sync.WaitGroup // pending releases, dropped at Stop

	offset         atomic.Int64 // ClockOffset, in ns
	measured       atomic.Bool
	measureFailing atomic.Bool // the last measurement failed (logged once)

	stopOnce sync.Once
	done     context.Context // Stop's result
}

// New returns a Scheduler that adds jobs to c and takes their locks with
// locker. c keeps its own options (seconds field, location, logger,
// chain); the Scheduler parses specs with c's parser.
//
// Defaults: skew tolerance [DefaultSkewTolerance] (500 ms), stop grace
// [DefaultStopGrace] (10 s), the system clock, [slog.Default], no
// callback.
//
// New does not fail: a nil c or locker or a bad option makes every
// [Scheduler.AddFunc] and [Scheduler.AddJob] call return an error wrapping
// [ErrInvalid] that names the problem.
func New(c *cron.Cron, locker lock.Locker, opts ...Option) *Scheduler {
	s := &Scheduler{c: c, locker: locker, jobs: make(map[string]*entry), markers: make(map[string]*marker)}
	s.life, s.kill = context.WithCancelCause(context.Background())
	s.cfg, s.err = newConfig(opts)
	switch {
	case c == nil:
		s.err = invalidf("nil *cron.Cron")
	case locker == nil:
		s.err = invalidf("nil lock.Locker")
	}
	return s
}

// AddFunc adds fn as job name on schedule spec, parsed by the cron's
// parser, and returns the cron entry's ID. (cron offers no other way to
// its parser than adding an entry: AddFunc adds a placeholder entry and
// removes it, which a verbose cron logger shows.)
//
// At every tick of spec, every replica's cron fires; the first to take
// the tick runs fn, the others skip (see [Outcome]). Runs of a job never
// overlap: when the previous run still holds the job, the tick is skipped
// everywhere. Replicas find each other by name: jobs with the same name on
// Schedulers sharing a Redis are one job and must have the same spec; a
// replica that finds the tick taken for a tick its spec does not have
// reports [OutcomeSkippedOtherSpec].
// "@every d" specs are aligned so their ticks are the same on every
// replica: multiples of d since the zero time (for a d that divides a day,
// times of day in UTC: "@every 15m" ticks at :00, :15, :30 and :45).
//
// fn's context holds the job's run lock (see [FencingToken]) and is
// cancelled with a cause: [lock.ErrLost] when the lock's lease is lost,
// [lock.ErrClosed] when the Locker is closed, [ErrAtMostFor] when the run
// reaches its [AtMostFor] limit, and [ErrStopped] when [Scheduler.Stop]'s
// grace period ends. A panic in fn is recovered and reported as a failed
// run; the lock is released either way.
//
// Errors wrap [ErrInvalid] for an empty, duplicate or too long name, a nil
// fn, a spec the cron cannot parse or whose period is not above 8/7 of the
// skew tolerance, an [AtLeastFor] not shorter than the period, a bad job
// option or a bad argument to [New]; after Stop
// the error is [ErrStopped]. On error nothing is added.
func (s *Scheduler) AddFunc(spec, name string, fn func(ctx context.Context) error, opts ...JobOption) (cron.EntryID, error) {
	var job Job
	if fn != nil {
		job = jobFunc(fn)
	}
	return s.AddJob(spec, name, job, opts...)
}

// AddJob is [Scheduler.AddFunc] for a [Job].
func (s *Scheduler) AddJob(spec, name string, job Job, opts ...JobOption) (cron.EntryID, error) {
	return s.add(spec, name, job, opts, false)
}

// Update gives job name a new spec and job options, as one change: the
// cron entry is replaced (a run in progress finishes under the old
// options) and the new entry's ID returned. The job itself stays. Replicas
// that share the name must be updated too (a rolling deploy): until then
// they run the job on their own spec, each tick at most once. Errors are
// those of AddFunc, and [ErrUnknownJob] when no job has that name.
func (s *Scheduler) Update(name, spec string, opts ...JobOption) (cron.EntryID, error) {
	return s.add(spec, name, nil, opts, true)
}

// Remove removes job name from the cron and frees its name; a run in
// progress finishes. It returns [ErrUnknownJob] when no job has that name.
// Removing the job's entry from the cron itself (c.Remove with the ID
// AddFunc returned) does the same: the name is free again, and Update,
// RunNow and Remove return ErrUnknownJob for it.
func (s *Scheduler) Remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.lookup(name)
	if e == nil {
		return unknownJob(name)
	}
	s.c.Remove(e.id)
	delete(s.jobs, name)
	return nil
}

// RunNow runs job name once now, on this replica, under the job's run
// lock as a scheduled run would (no overlap with a run on any replica:
// when one holds the job, the attempt is skipped-held), and returns the
// attempt, which is also logged and handed to the callback. Its tick (the
// attempt's Tick and [Tick] of the job's context) is the time of the call
// by the Scheduler's clock, corrected by Redis's; when the Scheduler does
// not know Redis's time yet (see [Scheduler.ClockOffset]) there is none:
// Attempt.Tick is zero and Tick reports false. The lock is taken within
// the skew tolerance. It returns [ErrUnknownJob] for an unknown name and
// [ErrStopped] after Stop.
func (s *Scheduler) RunNow(name string) (Attempt, error) {
	s.mu.Lock()
	e := s.lookup(name)
	s.mu.Unlock()
	if e == nil {
		return Attempt{}, unknownJob(name)
	}
	if !s.begin() {
		return Attempt{}, ErrStopped
	}
	defer s.wg.Done()
	a := Attempt{Job: name}
	if s.timeKnown() { // before now: the offset is stored first
		a.Tick = s.now()
	}
	a = e.run(a, s.cfg.tolerance)
	s.report(a)
	return a, nil
}

// lookup returns job name, or nil when there is none. A job whose cron
// entry was removed from the cron itself (c.Remove) is gone: lookup
// forgets it, which frees its name. s.mu must be held.
func (s *Scheduler) lookup(name string) *entry {
	e := s.jobs[name]
	if e != nil && !s.c.Entry(e.id).Valid() {
		delete(s.jobs, name)
		return nil
	}
	return e
}

func unknownJob(name string) error { return fmt.Errorf("%w: %q", ErrUnknownJob, loggedName(name)) }

// add adds job name, or with replace gives the job of that name a new
// spec and options.
func (s *Scheduler) add(spec, name string, job Job, opts []JobOption, replace bool) (cron.EntryID, error) {
	if s.err != nil {
		return 0, s.err
	}
	switch {
	case name == "":
		return 0, invalidf("empty job name")
	case len(name) > MaxNameLen:
		return 0, invalidf("job name of %d bytes is longer than the maximum %d", len(name), MaxNameLen)
	case job == nil && !replace:
		return 0, invalidf("job %q: nil job", name)
	}
	jc, err := newJobConfig(opts)
	if err != nil {
		return 0, invalidf("job %q: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.lookup(name)
	switch {
	case s.stopped:
		return 0, ErrStopped
	case old != nil && !replace:
		return 0, invalidf("job %q: name already added", name)
	case old == nil && replace:
		return 0, unknownJob(name)
	case replace:
		job = old.job
	}
	parsed, err := parse(s.c, spec)
	if err != nil {
		return 0, invalidf("job %q: spec %q: %w", name, spec, err)
	}
	ticks, fires := s.schedules(parsed)
	if err := checkPeriod(ticks, s.now(), s.cfg.tolerance); err != nil {
		return 0, invalidf("job %q: spec %q: %w", name, spec, err)
	}
	if err := checkAtLeast(ticks, s.now(), jc); err != nil {
		return 0, invalidf("job %q: spec %q: %w", name, spec, err)
	}
	e := &entry{
		s:       s,
		name:    name,
		job:     job,
		cfg:     jc,
		spec:    spec,
		ticks:   ticks,
		runKey:  runKeyPrefix + name,
		tickKey: tickKeyPrefix + name,
	}
	if old != nil {
		s.c.Remove(old.id)
	}
	if e.marker = s.markers[name]; e.marker == nil {
		e.marker = &marker{}
		s.markers[name] = e.marker
	} else {
		e.marker.dueBy(ticks.Next(s.now())) // the new spec's next tick must find it free
	}
	e.id = s.c.Schedule(fires, e)
	s.jobs[name] = e
	return e.id, nil
}

// Start starts the cron and, when the Locker can tell Redis's time, the
// measurement of this replica's clock offset (see [Scheduler.ClockOffset]):
// Start first waits up to 1 s for Redis's time, so that the first ticks
// fire by it. Until a measurement succeeds (Redis stalled or unreachable)
// the Scheduler runs no tick, reports each as failed with
// [ErrClockUnknown], and measures again every second. Call it rather than
// the cron's own Start, which measures nothing. It does nothing after
// [Scheduler.Stop], when [New] got a bad argument, or when started already.
func (s *Scheduler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.err != nil || s.started {
		return
	}
	s.started = true
	rc, ok := clockOf(s.locker)
	if ok {
		s.measureOffset(rc) // before the first tick fires (at most 1 s)
	}
	s.c.Start()
	if ok {
		s.watchClock(rc)
	}
}

// begin registers a run attempt; it reports false after Stop.
func (s *Scheduler) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	return true
}

// Stop stops the cron, so that no tick fires any more (ticks that fire
// while it stops are dropped), and returns a context that is done when
// every run has returned and released its locks.
//
// Running jobs get the grace period set with [WithStopGrace] to finish;
// then their contexts are cancelled with cause [ErrStopped]. Stop does not
// wait for locks kept after a run: a lock kept for [AtLeastFor] ends when
// its window does, also after Stop, which sets its lease to what is left
// of the window (a closed Locker releases it at once); a tick marker
// lapses with its fixed lease, at most about 4 × the skew tolerance after
// its tick, so that a late replica cannot run the tick again. With no run in
// progress the returned context is done at once; otherwise within the
// grace period plus the time the job takes to return and its release
// (bounded by the Locker: 1 s for a lock.Client, whatever Redis does; 1 s
// more to hand the rest of an AtLeastFor window to Redis). A
// job that ignores its context keeps the returned context from being
// done, as it keeps the cron's.
//
// Stop does not close the Locker. Calling it again returns the same
// context. A stopped Scheduler cannot be started again.
func (s *Scheduler) Stop() context.Context {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		cronDone := closed
		if s.err == nil {
			cronDone = s.c.Stop().Done()
		}
		var cancel context.CancelFunc
		s.done, cancel = context.WithCancel(context.Background())
		go s.shutdown(cronDone, cancel)
	})
	return s.done
}

// closed is a channel that is closed.
var closed = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (s *Scheduler) shutdown(cronDone <-chan struct{}, done context.CancelFunc) {
	idle := make(chan struct{})
	go func() {
		<-cronDone
		s.wg.Wait()
		close(idle)
	}()
	grace := time.NewTimer(s.cfg.grace)
	select {
	case <-idle:
	case <-grace.C:
	}
	grace.Stop()
	s.kill(ErrStopped)
	<-idle
	s.timers.Wait() // they end at once: life is over
	done()
}
