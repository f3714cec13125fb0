package cronlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// fleet is replicas of one "@every 1s" job on real crons, sharing a
// real redis-server, and what they did.
type fleet struct {
	replicas []*replica
	mu       sync.Mutex
	runs     []interval        // every run of the job, by start
	fires    [][]time.Duration // per replica: fire time less the nearest whole second
}

type interval struct {
	tick       time.Time // by the running replica's clock
	start, end time.Time
}

// newFleet starts one replica per clock offset; a replica with a non-zero
// offset gets a clock that far ahead of the system clock (WithClock),
// like a host whose clock is off. Each run of the job takes work. With
// redisTime the replicas keep time by Redis's clock, as they do with a
// lock.Client; otherwise their Locker cannot tell Redis's time and they
// keep their own clocks.
func newFleet(t *testing.T, rdb redis.UniversalClient, offsets []time.Duration, work time.Duration, redisTime bool, opts ...cronlock.Option) *fleet {
	t.Helper()
	f := &fleet{fires: make([][]time.Duration, len(offsets))}
	name := uniqueName()
	for i, off := range offsets {
		r := &replica{locker: locktest.NewClient(t, rdb), rec: newRecorder()}
		r.c = cron.New(cron.WithSeconds(), cron.WithChain(f.recordFires(i)))
		ropts := opts
		if off != 0 {
			ropts = append(slices.Clone(opts), cronlock.WithClock(func() time.Time { return time.Now().Add(off) }))
		}
		var l lock.Locker = r.locker
		if !redisTime {
			l = lockerOnly{l}
		}
		r.s = newScheduler(t, r.c, l, r.rec, ropts...)
		r.add(t, name, f.job(work))
		f.replicas = append(f.replicas, r)
	}
	for _, r := range f.replicas {
		r.s.Start()
	}
	return f
}

// recordFires is a cron job wrapper that records when replica i's cron
// fires.
func (f *fleet) recordFires(i int) cron.JobWrapper {
	return func(j cron.Job) cron.Job {
		return cron.FuncJob(func() {
			now := time.Now()
			f.mu.Lock()
			f.fires[i] = append(f.fires[i], now.Sub(now.Round(time.Second)))
			f.mu.Unlock()
			j.Run()
		})
	}
}

func (f *fleet) job(work time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		tick, _ := cronlock.Tick(ctx)
		iv := interval{tick: tick, start: time.Now()}
		time.Sleep(work)
		iv.end = time.Now()
		f.mu.Lock()
		f.runs = append(f.runs, iv)
		f.mu.Unlock()
		return nil
	}
}

// halt stops every replica's Scheduler without waiting.
func (f *fleet) halt() {
	for _, r := range f.replicas {
		r.s.Stop()
	}
}

// stop stops every replica and waits for their runs.
func (f *fleet) stop(t *testing.T) {
	t.Helper()
	for _, r := range f.replicas {
		waitStopped(t, r.s)
	}
	slices.SortFunc(f.runs, func(a, b interval) int { return a.start.Compare(b.start) })
}

// count returns how many attempts of all replicas ended with o.
func (f *fleet) count(o cronlock.Outcome) int {
	n := 0
	for _, r := range f.replicas {
		n += r.rec.count(o)
	}
	return n
}

// overlaps returns how many runs started before the previous one ended.
func (f *fleet) overlaps() int {
	n := 0
	for i := 1; i < len(f.runs); i++ {
		if f.runs[i].start.Before(f.runs[i-1].end) {
			n++
		}
	}
	return n
}

// repeated returns how many ticks ran more than once.
func (f *fleet) repeated() int {
	per := make(map[time.Time]int)
	n := 0
	for _, iv := range f.runs {
		if per[iv.tick]++; per[iv.tick] == 2 {
			n++
		}
	}
	return n
}

// checkFires checks that replica i's cron fires off before the whole
// second, as a replica whose clock is off ahead does: its least delayed
// fire must be within 100 ms after that, or at most 5 ms before. A busy
// machine delays fires, never advances them; but a replica that keeps time
// by Redis's clock knows it only to within half a round trip (the
// shortest of three: see cronlock's offset.go).
func (f *fleet) checkFires(t *testing.T, i int, off time.Duration) {
	t.Helper()
	const early = 5 * time.Millisecond
	least := time.Second
	for _, d := range f.fires[i] {
		delay := ((d+off)%time.Second + time.Second) % time.Second // after the expected fire
		if delay >= time.Second-early {
			delay -= time.Second // just before it
		}
		least = min(least, delay)
	}
	if least > 100*time.Millisecond {
		t.Fatalf("replica %d fired at %v from the whole second, want within 5 ms before to 100 ms after %v", i, f.fires[i], -off)
	}
}

func (f *fleet) logSummary(t *testing.T) {
	t.Helper()
	var outcomes []string
	for o := cronlock.OutcomeRan; o <= cronlock.OutcomeLost; o++ {
		outcomes = append(outcomes, fmt.Sprintf("%s=%d", o, f.count(o)))
	}
	t.Logf("%d runs, %d ticks run twice, %d overlaps; attempts: %v", len(f.runs), f.repeated(), f.overlaps(), outcomes)
}

// TestOnceAcrossReplicas runs three replicas of an "@every 1s" job for
// 10 s against a real redis-server: 9 to 11 runs in all, one per tick,
// none overlapping, also when one replica's clock is 400 ms off. The
// three fleets run at the same time, each with its own redis-server.
func TestOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		offsets []time.Duration
		f       *fleet
	}{
		{name: "same clocks", offsets: []time.Duration{0, 0, 0}},
		{name: "one clock 400ms ahead", offsets: []time.Duration{0, 0, 400 * time.Millisecond}},
		{name: "one clock 400ms behind", offsets: []time.Duration{0, 0, -400 * time.Millisecond}},
	}
	for i := range tests {
		_, rdb := newReal(t)
		tests[i].f = newFleet(t, rdb, tests[i].offsets, 300*time.Millisecond, false)
	}
	time.Sleep(10 * time.Second)
	for _, tt := range tests {
		tt.f.halt() // all at once, so every fleet runs 10 s
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f
			f.stop(t)
			f.logSummary(t)
			if n := len(f.runs); n < 9 || n > 11 {
				t.Errorf("%d runs in 10 s, want 9 to 11", n)
			}
			if n := f.repeated(); n != 0 {
				t.Errorf("%d ticks ran more than once", n)
			}
			if n := f.overlaps(); n != 0 {
				t.Errorf("%d runs overlapped", n)
			}
			if n := f.count(cronlock.OutcomeFailed) + f.count(cronlock.OutcomeLost); n != 0 {
				t.Errorf("%d attempts failed or lost", n)
			}
			for i, off := range tt.offsets {
				f.checkFires(t, i, off)
			}
		})
	}
}

// TestSkewBeyondTolerance is the control of TestOnceAcrossReplicas: with
// a skew tolerance of 100 ms a replica keeps a tick's marker for 400 ms,
// so a replica 500 ms ahead lets go of each tick 100 ms before the other
// fires, and ticks run twice. The checks above do see double runs.
func TestSkewBeyondTolerance(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	f := newFleet(t, rdb, []time.Duration{0, 500 * time.Millisecond}, 100*time.Millisecond, false,
		cronlock.WithSkewTolerance(100*time.Millisecond))
	time.Sleep(4 * time.Second)
	f.stop(t)
	f.logSummary(t)
	if n := f.repeated(); n < 2 {
		t.Fatalf("%d ticks ran twice, want most of the 4", n)
	}
}

// TestSlowJobNeverOverlaps runs a 2.5 s job every second on three
// replicas: runs never overlap, and the ticks in between are reported
// skipped-held.
func TestSlowJobNeverOverlaps(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	f := newFleet(t, rdb, []time.Duration{0, 0, 0}, 2500*time.Millisecond, true)
	time.Sleep(6 * time.Second)
	f.stop(t)
	f.logSummary(t)
	if n := f.overlaps(); n != 0 {
		t.Fatalf("%d runs overlapped", n)
	}
	if ran, held := f.count(cronlock.OutcomeRan), f.count(cronlock.OutcomeSkippedHeld); ran < 2 || held < 2*(ran-1) {
		t.Fatalf("%d runs and %d ticks skipped-held, want at least 2 runs and 2 skipped ticks between runs", ran, held)
	}
	if n := f.count(cronlock.OutcomeFailed) + f.count(cronlock.OutcomeLost); n != 0 {
		t.Fatalf("%d attempts failed or lost", n)
	}
}

// lockerOnly hides the Time method of a lock.Client: a Scheduler with it
// keeps time by its own clock.
type lockerOnly struct{ lock.Locker }

// With a lock.Client, replicas keep time by Redis's clock: one replica 2 s
// behind and one 2.5 s ahead (four and five times the skew tolerance) run
// an "@every 1s" job once per tick, firing at Redis's whole seconds.
func TestOnceUnderSkewOnRedisTime(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	offsets := []time.Duration{0, -2 * time.Second, 2500 * time.Millisecond}
	f := newFleet(t, rdb, offsets, 100*time.Millisecond, true)
	time.Sleep(5 * time.Second)
	f.stop(t)
	f.logSummary(t)
	if n := len(f.runs); n < 4 || n > 6 {
		t.Errorf("%d runs in 5 s, want 4 to 6", n)
	}
	if n := f.repeated(); n != 0 {
		t.Errorf("%d ticks ran more than once", n)
	}
	if n := f.count(cronlock.OutcomeFailed) + f.count(cronlock.OutcomeLost); n != 0 {
		t.Errorf("%d attempts failed or lost", n)
	}
	for i := range offsets {
		f.checkFires(t, i, 0) // by Redis's clock, whatever the replica's
	}
}

// A job on two replicas whose clocks are 2 s behind and 2.5 s ahead of
// Redis's: by Redis's time both fire for the same tick, and it runs once;
// every second, every 5 s and daily.
func TestTickOnceUnderSkew(t *testing.T) {
	t.Parallel()
	tick := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	srv := newFakeRedisTime(t, tick.Add(50*time.Millisecond)) // Redis's clock, just after the tick
	for _, spec := range []string{"@every 1s", "*/5 * * * * *", "0 0 3 * * *"} {
		var outcomes []cronlock.Outcome
		name := uniqueName()
		for _, skew := range []time.Duration{-2 * time.Second, 2500 * time.Millisecond} {
			r := srv.newReplica(t, nil, cronlock.WithClock(newFakeClock(tick.Add(50*time.Millisecond+skew)).now))
			id := mustAdd(t, r.s, spec, name, nop)
			r.s.Start()
			fire(r.c, id)
			a := r.rec.only(t)
			outcomes = append(outcomes, a.Outcome)
			if !a.Tick.Equal(tick) {
				t.Errorf("%s, clock %v off: attempt for tick %v, want %v", spec, skew, a.Tick, tick)
			}
			waitStopped(t, r.s)
		}
		if outcomes[0] != cronlock.OutcomeRan || outcomes[1] != cronlock.OutcomeSkippedTickDone {
			t.Errorf("%s: outcomes %v, want ran then skipped-tick-done", spec, outcomes)
		}
	}
}
