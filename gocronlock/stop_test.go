package gocronlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// TestStopJobsWhileLockDerivesHolds calls gocron's StopJobs as 100 jobs
// of one name, every second, call Lock, with holds derived from the
// scheduler: StopJobs returns within a second, not after its stop
// timeout (6 s) with an error, as it would if Lock waited for the
// scheduler's goroutine, which waits for the runs to end.
func TestStopJobsWhileLockDerivesHolds(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	l := newLocker(t, locktest.NewClient(t, rdb), nil)
	s := newScheduler(t, gocron.WithDistributedLocker(l), gocron.WithStopTimeout(6*time.Second))
	l.DeriveHolds(s)
	name := uniqueName()
	for range 100 {
		if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), l.Task(func(context.Context) error { return nil }),
			gocron.WithName(name)); err != nil {
			t.Fatal(err)
		}
	}
	s.Start()
	// Just after the next second: the runs are calling Lock.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)))
	start := time.Now()
	err := s.StopJobs()
	took := time.Since(start)
	if err != nil || took > locktest.Bound(time.Second)/2 {
		t.Errorf("StopJobs = %v after %v, want nil within %v", err, took, locktest.Bound(time.Second)/2)
	}
}
