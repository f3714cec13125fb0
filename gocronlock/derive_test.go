package gocronlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// TestDeriveHoldsFollowsTheScheduler checks the holds DeriveHolds gives
// as the scheduler's jobs change after the call: a name two jobs share
// gets half the shorter interval, a job added after Start gets half its
// own, a removed job's name gets DefaultMinHold.
func TestDeriveHoldsFollowsTheScheduler(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	rec := &recorder{}
	l := newLocker(t, locktest.NewClient(t, rdb), rec)
	s := newScheduler(t, gocron.WithDistributedLocker(l))
	l.DeriveHolds(s)
	later := gocron.WithStartAt(gocron.WithStartDateTime(time.Now().Add(time.Hour))) // no run in the test
	job := l.Task(func(context.Context) error { return nil })
	reused, added, removed := uniqueName(), uniqueName(), uniqueName()
	add := func(name string, every time.Duration) gocron.Job {
		t.Helper()
		j, err := s.NewJob(gocron.DurationJob(every), job, gocron.WithName(name), later)
		if err != nil {
			t.Fatalf("NewJob: %v", err)
		}
		return j
	}
	add(reused, 2*time.Hour)
	add(reused, 20*time.Minute)
	gone := add(removed, time.Hour)
	s.Start()
	add(added, 40*time.Minute)
	if err := s.RemoveJob(gone.ID()); err != nil {
		t.Fatalf("RemoveJob: %v", err)
	}
	for _, tt := range []struct {
		name string
		want time.Duration
	}{
		{reused, 10 * time.Minute},
		{added, 20 * time.Minute},
		{removed, gocronlock.DefaultMinHold},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		lk, err := l.Lock(ctx, tt.name)
		if err != nil {
			t.Fatalf("Lock(%s): %v", tt.name, err)
		}
		_ = lk.Unlock(ctx)
		cancel()
		all := rec.all()
		if a := all[len(all)-1]; a.MinHold != tt.want {
			t.Errorf("job %s: minimum hold %v, want %v", tt.name, a.MinHold, tt.want)
		}
	}
}

// TestRunNowOnTwoReplicasRunsOnce calls RunNow on two replicas' copies of
// a job at once, five times 300 ms apart (minimum hold 200 ms): each
// time exactly one replica runs it, the other is told ErrHeld or
// ErrTickDone.
func TestRunNowOnTwoReplicasRunsOnce(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	name, rec, log := uniqueName(), &recorder{}, &runLog{}
	var jobs []gocron.Job
	for i := range 2 {
		l := newLocker(t, locktest.NewClient(t, rdb), rec, gocronlock.WithMinHold(200*time.Millisecond))
		s := newScheduler(t, gocron.WithDistributedLocker(l))
		j, err := s.NewJob(gocron.DurationJob(time.Hour), l.Task(log.job(i, 50*time.Millisecond)), gocron.WithName(name),
			gocron.WithStartAt(gocron.WithStartDateTime(time.Now().Add(time.Hour))))
		if err != nil {
			t.Fatalf("NewJob: %v", err)
		}
		s.Start()
		jobs = append(jobs, j)
	}
	const rounds = 5
	for round := range rounds {
		start := time.Now()
		done := make(chan error, 2)
		for _, j := range jobs {
			go func() { done <- j.RunNow() }()
		}
		for range jobs {
			if err := <-done; err != nil {
				t.Fatalf("RunNow: %v", err)
			}
		}
		locktest.Eventually(t, locktest.Bound(2*time.Second), "both attempts of the round reported", func() bool {
			return len(rec.all()) >= 2*(round+1)
		})
		time.Sleep(time.Until(start.Add(300 * time.Millisecond)))
	}
	if n := len(log.sorted()); n != rounds {
		t.Errorf("%d runs in %d rounds, want one each: %v", n, rounds, rec.all())
	}
	for _, a := range rec.all() {
		if a.Outcome != gocronlock.OutcomeRan && a.Outcome != gocronlock.OutcomeSkippedHeld && a.Outcome != gocronlock.OutcomeSkippedTickDone {
			t.Errorf("attempt %+v, want ran or skipped", a)
		}
	}
}
