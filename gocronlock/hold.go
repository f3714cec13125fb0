package gocronlock

import (
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
// (one request to the scheduler's goroutine, no Redis call).
func (l *Locker) DeriveHolds(s gocron.Scheduler) {
	if s != nil {
		l.sched.Store(&schedulerRef{s})
	}
}

// minHold is the minimum hold of job's next marker.
func (l *Locker) minHold(job string) time.Duration {
	if l.cfg.minHold > 0 {
		return l.cfg.minHold
	}
	if ref := l.sched.Load(); ref != nil {
		if gap, ok := shortestGap(ref.s, job); ok {
			return max(gap/2, lock.MinLease)
		}
	}
	return DefaultMinHold
}

// shortestGap returns the shortest interval between runs of the jobs of s
// named job.
func shortestGap(s gocron.Scheduler, job string) (time.Duration, bool) {
	var gap time.Duration
	for _, j := range s.Jobs() {
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
