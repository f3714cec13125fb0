package gocronlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The fleet table: replicas of one job, each with its own lock.Client and
// gocron scheduler on one real redis-server, started apart and with
// clocks off, under the naive Locker (the control) and under
// gocronlock's. Each run is counted for its tick: the scheduled time it
// was fired for, by its replica's schedule, in real time; ticks of the
// replicas less than half the interval apart are one. Runs beyond one per
// tick are double runs; ticks between the first and the last that ran
// nowhere are missed.

// tally is one row of the table.
type tally struct{ runs, doubles, missed int }

func (r tally) String() string {
	return fmt.Sprintf("runs=%d double-runs=%d missed-ticks=%d", r.runs, r.doubles, r.missed)
}

// count tallies runs whose ticks are ticks, of a job every interval.
func count(ticks []time.Time, interval time.Duration) tally {
	t := tally{runs: len(ticks)}
	if len(ticks) == 0 {
		return t
	}
	first := slices.MinFunc(ticks, time.Time.Compare)
	ran := map[int64]bool{}
	var last int64
	for _, tick := range ticks {
		n := int64((tick.Sub(first) + interval/2) / interval)
		ran[n] = true
		last = max(last, n)
	}
	t.doubles = len(ticks) - len(ran)
	t.missed = int(last+1) - len(ran)
	return t
}

type fleetCase struct {
	name     string
	def      func() gocron.JobDefinition
	interval time.Duration
	offsets  []time.Duration // of each replica's clock
	gap      time.Duration   // between the replicas' starts
	// tick is the scheduled time of a run fired at fire by a replica
	// started at start, both by its clock.
	tick func(fire, start time.Time) time.Time
}

// aligned is the tick of a job on multiples of interval, such as a cron
// job every 2 s: the last multiple.
func aligned(interval time.Duration) func(fire, start time.Time) time.Time {
	return func(fire, _ time.Time) time.Time { return fire.Truncate(interval) }
}

// fromStart is the tick of a DurationJob: the last multiple of interval
// after the start.
func fromStart(interval time.Duration) func(fire, start time.Time) time.Time {
	return func(fire, start time.Time) time.Time { return start.Add(fire.Sub(start).Truncate(interval)) }
}

const every = 2 * time.Second // the fleets' interval

var fleetCases = []fleetCase{
	{name: "DurationJob 2s, 2 replicas started 300ms apart",
		def: func() gocron.JobDefinition { return gocron.DurationJob(every) }, interval: every,
		offsets: []time.Duration{0, 0}, gap: 300 * time.Millisecond, tick: fromStart(every)},
	{name: "CronJob every 2s, 3 replicas, clocks -150ms/0/+150ms",
		def: func() gocron.JobDefinition { return gocron.CronJob("*/2 * * * * *", true) }, interval: every,
		offsets: []time.Duration{-150 * time.Millisecond, 0, 150 * time.Millisecond}, gap: 300 * time.Millisecond, tick: aligned(every)},
}

// firing is a gocron.Locker that records when replica i's gocron asks
// for the lock: when it fires.
type firing struct {
	gocron.Locker
	i   int
	log *runLog
}

func (f firing) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	f.log.add(f.i)
	return f.Locker.Lock(ctx, key)
}

// runFleet runs c's replicas, with gocronlock's Locker with opts when
// guarded and the naive one otherwise, and tallies the runs that start
// within 4 intervals from one interval after the last replica started.
// spread is how far apart, at most, the replicas fired for one tick.
func runFleet(t *testing.T, c fleetCase, guarded bool, opts ...gocronlock.Option) (_ tally, spread time.Duration, _ *recorder) {
	rdb := redistest.Start(t).Client(t)
	name, rec, log, fires := uniqueName(), &recorder{}, &runLog{}, &runLog{}
	var scheds []gocron.Scheduler
	for i, off := range c.offsets {
		client := locktest.NewClient(t, rdb)
		sopts := []gocron.SchedulerOption{gocron.WithClock(offsetClock{clockwork.NewRealClock(), off})}
		task := gocron.NewTask(log.job(i, 50*time.Millisecond))
		var l *gocronlock.Locker
		var locker gocron.Locker = naiveLocker{client}
		if guarded {
			l = newLocker(t, client, rec, opts...)
			locker, task = l, l.Task(log.job(i, 50*time.Millisecond))
		}
		sopts = append(sopts, gocron.WithDistributedLocker(firing{locker, i, fires}))
		s := newScheduler(t, sopts...)
		if l != nil {
			l.DeriveHolds(s)
		}
		if _, err := s.NewJob(c.def(), task, gocron.WithName(name)); err != nil {
			t.Fatalf("NewJob: %v", err)
		}
		scheds = append(scheds, s)
	}
	starts := make([]time.Time, len(scheds)) // by each replica's clock
	for i, s := range scheds {
		if i > 0 {
			time.Sleep(c.gap)
		}
		starts[i] = time.Now().Add(c.offsets[i])
		s.Start()
	}
	from := time.Now().Add(c.interval)
	time.Sleep(c.interval + 4*c.interval)
	for _, s := range scheds {
		if err := s.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
	tickOf := func(r runRec) time.Time { // in real time
		off := c.offsets[r.replica]
		return c.tick(r.start.Add(off), starts[r.replica]).Add(-off)
	}
	var ticks []time.Time
	for _, r := range log.sorted() {
		if !r.start.Before(from) {
			ticks = append(ticks, tickOf(r))
		}
	}
	first := map[time.Duration]time.Time{} // the first fire for each tick
	var ref time.Time
	for i, r := range fires.sorted() {
		if i == 0 {
			ref = tickOf(r)
		}
		// Replicas' ticks for one run are less than half the interval apart.
		n := (tickOf(r).Sub(ref) + c.interval/2) / c.interval
		if f, ok := first[n]; !ok {
			first[n] = r.start
		} else {
			spread = max(spread, r.start.Sub(f))
		}
	}
	return count(ticks, c.interval), spread, rec
}

// TestFleet prints the fleet table and checks it: the naive Locker runs
// ticks twice (the control: the counts do see double runs), gocronlock's
// runs each tick once and misses none.
func TestFleet(t *testing.T) {
	t.Parallel()
	for _, c := range fleetCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // the cases at once, each case's adapters in turn
			for _, guarded := range []bool{false, true} {
				adapter := map[bool]string{false: "naive", true: "gocronlock"}[guarded]
				t.Run(adapter, func(t *testing.T) {
					got, spread, rec := runFleet(t, c, guarded)
					t.Logf("%s | %s | %v (replicas fired up to %v apart)", c.name, adapter, got, spread.Round(time.Millisecond))
					checkRow(t, got, 3, guarded, rec, spread)
				})
			}
		})
	}
}

// TestFleetHoldBelowSpread is the control of the bound: with a minimum
// hold of 100 ms, replicas that fire 300 ms apart for each tick both run
// it, and the counts see the double runs.
func TestFleetHoldBelowSpread(t *testing.T) {
	t.Parallel()
	c := fleetCases[0]
	got, spread, _ := runFleet(t, c, true, gocronlock.WithMinHold(100*time.Millisecond))
	t.Logf("%s | gocronlock, min hold 100ms | %v (replicas fired up to %v apart)", c.name, got, spread.Round(time.Millisecond))
	if got.doubles < 2 {
		t.Errorf("%v, want double runs: the replicas fire further apart than the minimum hold", got)
	}
}

// checkRow checks a row of at least min ticks, whose replicas fired up to
// spread apart for a tick (0: not measured).
func checkRow(t *testing.T, got tally, min int, guarded bool, rec *recorder, spread time.Duration) {
	t.Helper()
	if ticks := got.runs - got.doubles; ticks < min {
		t.Errorf("%d ticks ran, want at least %d", ticks, min)
	}
	if !guarded {
		if got.doubles < 2 {
			t.Errorf("the naive Locker ran %d ticks twice, want the double runs it is the control of", got.doubles)
		}
		return
	}
	if got.doubles != 0 || got.missed != 0 {
		t.Errorf("%v, want no double run and no missed tick (the replicas fired up to %v apart for a tick; the guarantee needs less than the minimum hold); attempts: %v",
			got, spread, rec.all())
	}
	if n := rec.count(gocronlock.OutcomeFailed) + rec.count(gocronlock.OutcomeLost); n != 0 {
		t.Errorf("%d attempts failed or lost: %v", n, rec.all())
	}
}

// TestFleetDaily runs a daily job at 09:00 UTC on two replicas with fake
// clocks that reach each 09:00 300 ms apart, for 4 days.
func TestFleetDaily(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{false, true} {
		adapter := map[bool]string{false: "naive", true: "gocronlock"}[guarded]
		t.Run(adapter, func(t *testing.T) {
			t.Parallel()
			got, rec := runDaily(t, guarded, 4)
			t.Logf("DailyJob 09:00 UTC, 2 replicas, fake clocks 300ms apart | %s | %v", adapter, got)
			checkRow(t, got, 4, guarded, rec, 0)
		})
	}
}

// runDaily runs days days of a daily job on two replicas and tallies
// them by fake day.
func runDaily(t *testing.T, guarded bool, days int) (tally, *recorder) {
	r, rdb := locktest.NewRedis(t)
	name, rec := uniqueName(), &recorder{}
	// A hold far above the 300 ms between the replicas' 09:00: under two
	// busy loops a replica's firing came over 400 ms late.
	const minHold = 2 * time.Second
	start := time.Date(2030, 1, 2, 8, 59, 59, 0, time.UTC)
	var clocks []*clockwork.FakeClock
	perDay := make([]int, days)
	day := -1 // the fake day under way, read by the job under mu
	var mu sync.Mutex
	for i := 0; i < 2; i++ {
		client := locktest.NewClient(t, rdb)
		clock := clockwork.NewFakeClockAt(start)
		job := func(context.Context) error {
			mu.Lock()
			perDay[day]++
			mu.Unlock()
			return nil
		}
		opts := []gocron.SchedulerOption{gocron.WithClock(clock)}
		task := gocron.NewTask(job)
		if guarded {
			l := newLocker(t, client, rec, gocronlock.WithMinHold(minHold))
			opts = append(opts, gocron.WithDistributedLocker(l))
			task = l.Task(job)
		} else {
			opts = append(opts, gocron.WithDistributedLocker(naiveLocker{client}))
		}
		s := newScheduler(t, opts...)
		def := gocron.DailyJob(1, gocron.NewAtTimes(gocron.NewAtTime(9, 0, 0)))
		if _, err := s.NewJob(def, task, gocron.WithName(name)); err != nil {
			t.Fatalf("NewJob: %v", err)
		}
		s.Start()
		clocks = append(clocks, clock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	marker := "lockkit:{gocronlock:tick:" + name + "}"
	for d := 0; d < days; d++ {
		step := 24 * time.Hour
		if d == 0 {
			step = time.Second
		}
		mu.Lock()
		day = d
		mu.Unlock()
		for i, clock := range clocks {
			if i > 0 {
				time.Sleep(300 * time.Millisecond) // the other replica's clock reaches 09:00 later
			}
			if err := clock.BlockUntilContext(ctx, 1); err != nil {
				t.Fatalf("day %d: replica %d has no timer: %v", d, i, err)
			}
			clock.Advance(step)
		}
		for i, clock := range clocks { // each has fired and set its next timer
			if err := clock.BlockUntilContext(ctx, 1); err != nil {
				t.Fatalf("day %d: replica %d did not fire: %v", d, i, err)
			}
		}
		// The next 09:00 is a day later: the minimum hold, by Redis's
		// clock, has passed.
		locktest.Eventually(t, 5*time.Second, "marker gone", func() bool { return !r.Exists(marker) })
	}
	var ticks []time.Time
	mu.Lock() // a run may still be under way
	for d, n := range perDay {
		for range n {
			ticks = append(ticks, start.Add(time.Duration(d)*24*time.Hour))
		}
	}
	mu.Unlock()
	return count(ticks, 24*time.Hour), rec
}
