package gocronlock

import (
	"context"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockkit/lockkit/lock"
)

type schedulerRef struct{ s gocron.Scheduler }

// DeriveHolds tells the Locker the scheduler it locks jobs of, so that
// the minimum hold of each job, unless [WithMinHold] is set, is half its
// shortest interval: the smallest gap between its next few scheduled runs
// (gocron's Job.NextRuns), or half the Min of a DurationRandomJob. A job
// the scheduler does not have by the name Lock gets, or with fewer than
// two runs ahead, gets [DefaultMinHold]. Call it after
// gocron.NewScheduler, before Start; the hold is worked out at every run
// (requests to the scheduler's goroutine, no Redis call), and a run
// whose job context ends meanwhile (StopJobs, RemoveJob, Shutdown) fails
// with its error.
func (l *Locker) DeriveHolds(s gocron.Scheduler) {
	if s != nil {
		l.sched.Store(&schedulerRef{s})
	}
}

// minHold returns the minimum hold of job's next marker, or ctx's error
// when ctx (gocron's job context) ends first. The scheduler's goroutine
// answers for a derived hold; while gocron stops jobs it waits for their
// runs, this one among them, after ending their contexts: so the
// question is asked on a goroutine of its own, which the scheduler
// answers (or its shutdown, or gocron's 1 s timeout, ends) after Lock
// gave up.
func (l *Locker) minHold(ctx context.Context, job string) (time.Duration, error) {
	if l.cfg.minHold > 0 {
		return l.cfg.minHold, nil
	}
	ref := l.sched.Load()
	if ref == nil {
		return DefaultMinHold, nil
	}
	got := make(chan time.Duration, 1)
	go func() {
		hold := DefaultMinHold
		if gap, ok := shortestGap(ctx, ref.s, job); ok {
			hold = max(gap/2, lock.MinLease)
		}
		got <- hold
	}()
	select {
	case hold := <-got:
		return hold, nil
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// shortestGap returns the shortest interval between runs of the jobs of s
// named job. It stops asking when ctx ends (each question may wait 1 s).
func shortestGap(ctx context.Context, s gocron.Scheduler, job string) (time.Duration, bool) {
	var gap time.Duration
	for _, j := range s.Jobs() {
		if ctx.Err() != nil {
			return 0, false
		}
		if j.Name() != job {
			continue
		}
		if g, ok := jobGap(j); ok && (gap == 0 || g < gap) {
			gap = g
		}
	}
	return gap, gap > 0
}

// jobGap returns the shortest interval between j's runs ahead.
func jobGap(j gocron.Job) (time.Duration, bool) {
	if r, ok := j.Schedule().(gocron.DurationRandomJobSchedule); ok {
		return r.Min, r.Min > 0
	}
	runs, err := j.NextRuns(4)
	if err != nil {
		return 0, false
	}
	var gap time.Duration
	for i := 1; i < len(runs); i++ {
		if g := runs[i].Sub(runs[i-1]); g > 0 && (gap == 0 || g < gap) {
			gap = g
		}
	}
	return gap, gap > 0
}
