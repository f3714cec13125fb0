package gocronlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestSlowJobSkipsHeld runs a 1.5 s job every second on two replicas:
// runs never overlap, the ticks in between are skipped as held, and
// gocron's AfterLockError listeners get ErrHeld and ErrTickDone.
func TestSlowJobSkipsHeld(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	name, rec, log := uniqueName(), &recorder{}, &runLog{}
	var mu sync.Mutex
	lockErrs := map[error]int{}
	var scheds []gocron.Scheduler
	for i := range 2 {
		l := newLocker(t, locktest.NewClient(t, rdb), rec)
		s := newScheduler(t, gocron.WithDistributedLocker(l))
		l.DeriveHolds(s)
		onLockErr := gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
			mu.Lock()
			defer mu.Unlock()
			for _, want := range []error{gocronlock.ErrHeld, gocronlock.ErrTickDone} {
				if errors.Is(err, want) {
					lockErrs[want]++
					return
				}
			}
			lockErrs[err]++
		})
		if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), l.Task(log.job(i, 1500*time.Millisecond)),
			gocron.WithName(name), gocron.WithEventListeners(onLockErr)); err != nil {
			t.Fatalf("NewJob: %v", err)
		}
		scheds = append(scheds, s)
	}
	for _, s := range scheds {
		s.Start()
	}
	locktest.Eventually(t, 15*time.Second, "3 runs and 2 ticks skipped as held", func() bool {
		return rec.count(gocronlock.OutcomeRan) >= 3 && rec.count(gocronlock.OutcomeSkippedHeld) >= 2
	})
	for _, s := range scheds {
		_ = s.Shutdown()
	}
	runs := log.sorted()
	for i := 1; i < len(runs); i++ {
		if gap := runs[i].start.Sub(runs[i-1].start); gap < 1500*time.Millisecond {
			t.Errorf("run %d started %v after the previous one, which works 1.5 s", i, gap)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if lockErrs[gocronlock.ErrHeld] < 2 || lockErrs[gocronlock.ErrTickDone] < 1 || len(lockErrs) != 2 {
		t.Errorf("AfterLockError got %v, want ErrHeld at least twice, ErrTickDone, nothing else", lockErrs)
	}
	if n := rec.count(gocronlock.OutcomeFailed) + rec.count(gocronlock.OutcomeLost); n != 0 {
		t.Errorf("%d attempts failed or lost: %v", n, rec.all())
	}
	// A tick reported done on one replica ran on the other.
	if done := rec.count(gocronlock.OutcomeSkippedTickDone); done > len(runs) {
		t.Errorf("%d ticks reported done elsewhere, but only %d runs", done, len(runs))
	}
}

// TestLostEndsRunContext deletes the run lock's key while the job runs:
// the job's context, through Task, ends with cause lock.ErrLost within
// the lease, and the attempt is reported lost.
func TestLostEndsRunContext(t *testing.T) {
	t.Parallel()
	r, rdb := locktest.NewRedis(t)
	name, rec := uniqueName(), &recorder{}
	l := newLocker(t, locktest.NewClient(t, rdb), rec, gocronlock.WithLease(300*time.Millisecond))
	s := newScheduler(t, gocron.WithDistributedLocker(l))
	started, cause := make(chan uint64, 1), make(chan error, 1)
	job := func(ctx context.Context) error {
		token, _ := lock.FencingToken(ctx, "gocronlock:run:"+name)
		started <- token
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil
	}
	if _, err := s.NewJob(gocron.DurationJob(time.Hour), l.Task(job), gocron.WithName(name),
		gocron.WithStartAt(gocron.WithStartImmediately())); err != nil {
		t.Fatalf("NewJob: %v", err)
	}
	s.Start()
	var token uint64
	select {
	case token = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}
	if token == 0 {
		t.Errorf("the run's context carries no fencing token of its run lock")
	}
	if !r.Del("lockkit:{gocronlock:run:" + name + "}") {
		t.Fatal("no run lock key in Redis")
	}
	select {
	case err := <-cause:
		if !errors.Is(err, lock.ErrLost) {
			t.Errorf("the run's context ended with %v, want lock.ErrLost", err)
		}
	case <-time.After(locktest.Bound(2 * time.Second)):
		t.Fatal("the run's context did not end within 2 s of the loss")
	}
	_ = s.Shutdown()
	all := rec.all()
	if len(all) != 1 || all[0].Outcome != gocronlock.OutcomeLost || !errors.Is(all[0].Err, lock.ErrLost) || all[0].Token != token {
		t.Errorf("attempts %v, want one lost with lock.ErrLost and token %d", all, token)
	}
}

// TestMinHold checks the minimum hold attempts get: half the shortest
// interval with DeriveHolds, DefaultMinHold without, WithMinHold's.
func TestMinHold(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	for _, tt := range []struct {
		name   string
		derive bool
		opts   []gocronlock.Option
		want   time.Duration
	}{
		{name: "derived", derive: true, want: time.Second},
		{name: "default", want: gocronlock.DefaultMinHold},
		{name: "set", derive: true, opts: []gocronlock.Option{gocronlock.WithMinHold(300 * time.Millisecond)}, want: 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			l := newLocker(t, locktest.NewClient(t, rdb), rec, tt.opts...)
			s := newScheduler(t, gocron.WithDistributedLocker(l))
			if tt.derive {
				l.DeriveHolds(s)
			}
			job := func(context.Context) error { return nil }
			if _, err := s.NewJob(gocron.CronJob("*/2 * * * * *", true), l.Task(job), gocron.WithName(uniqueName())); err != nil {
				t.Fatalf("NewJob: %v", err)
			}
			s.Start()
			locktest.Eventually(t, 10*time.Second, "a run", func() bool { return len(rec.all()) > 0 })
			_ = s.Shutdown()
			if a := rec.all()[0]; a.Outcome != gocronlock.OutcomeRan || a.MinHold != tt.want {
				t.Errorf("attempt %+v, want ran with minimum hold %v", a, tt.want)
			}
		})
	}
}

// TestJobErrorFails checks that a job's error, through Func, is the
// attempt's, and that Func without the Locker's lock does not run.
func TestJobErrorFails(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	rec := &recorder{}
	l := newLocker(t, locktest.NewClient(t, rdb), rec)
	boom := errors.New("boom")
	ran := false
	fn := l.Func(func(context.Context) error { ran = true; return boom })
	if err := fn(context.Background()); !errors.Is(err, gocronlock.ErrNoRun) || ran {
		t.Fatalf("Func with no run lock = %v (ran %v), want ErrNoRun without running", err, ran)
	}
	s := newScheduler(t, gocron.WithDistributedLocker(l))
	if _, err := s.NewJob(gocron.DurationJob(time.Hour), gocron.NewTask(fn), gocron.WithName(uniqueName()),
		gocron.WithStartAt(gocron.WithStartImmediately())); err != nil {
		t.Fatalf("NewJob: %v", err)
	}
	s.Start()
	locktest.Eventually(t, 10*time.Second, "an attempt", func() bool { return len(rec.all()) > 0 })
	_ = s.Shutdown()
	if a := rec.all()[0]; a.Outcome != gocronlock.OutcomeFailed || !errors.Is(a.Err, boom) || a.Token == 0 {
		t.Errorf("attempt %+v, want failed with the job's error and a token", a)
	}
}

func TestNewLockerErrors(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	c := locktest.NewClient(t, rdb)
	for _, tt := range []struct {
		name   string
		locker lock.Locker
		opts   []gocronlock.Option
	}{
		{"nil locker", nil, nil},
		{"short hold", c, []gocronlock.Option{gocronlock.WithMinHold(time.Millisecond)}},
		{"short lease", c, []gocronlock.Option{gocronlock.WithLease(time.Millisecond)}},
		{"empty prefix", c, []gocronlock.Option{gocronlock.WithKeyPrefix("")}},
	} {
		if _, err := gocronlock.NewLocker(tt.locker, tt.opts...); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s: NewLocker = %v, want lock.ErrInvalid", tt.name, err)
		}
	}
}

// releases is a lock.Observer that records the Releases of one key.
type releases struct {
	key string
	mu  sync.Mutex
	got []lock.Release
}

func (o *releases) Background(ctx context.Context) context.Context { return ctx }
func (o *releases) AcquireStarted(ctx context.Context, _ lock.Acquire) context.Context {
	return ctx
}
func (o *releases) AcquireWaiting(context.Context, lock.Acquire) {}
func (o *releases) AcquireEnded(ctx context.Context, _ lock.Acquire, _ context.Context) context.Context {
	return ctx
}
func (o *releases) Renewed(lock.Renewal) {}
func (o *releases) Released(_ context.Context, r lock.Release) {
	if r.Key == o.key {
		o.mu.Lock()
		o.got = append(o.got, r)
		o.mu.Unlock()
	}
}

func (o *releases) all() []lock.Release {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]lock.Release(nil), o.got...)
}

// TestMarkerReleasedNotLost checks that tick markers end as releases,
// after the minimum hold, not as losses that lock observers count.
func TestMarkerReleasedNotLost(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	name := uniqueName()
	obs := &releases{key: "gocronlock:tick:" + name}
	rec := &recorder{}
	l := newLocker(t, locktest.NewClient(t, rdb, lock.WithObserver(obs)), rec, gocronlock.WithMinHold(200*time.Millisecond))
	s := newScheduler(t, gocron.WithDistributedLocker(l))
	job := func(context.Context) error { return nil }
	if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), l.Task(job), gocron.WithName(name)); err != nil {
		t.Fatalf("NewJob: %v", err)
	}
	s.Start()
	locktest.Eventually(t, 10*time.Second, "2 markers released", func() bool { return len(obs.all()) >= 2 })
	_ = s.Shutdown()
	for _, r := range obs.all() {
		if r.Cause != nil || r.Held < 200*time.Millisecond {
			t.Errorf("marker ended %+v, want released after the 200 ms minimum hold", r)
		}
	}
}
