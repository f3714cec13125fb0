package cronlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func nop(context.Context) error { return nil }

// addCall is the arguments of one AddFunc call.
type addCall struct {
	spec, name string
	fn         func(context.Context) error
	opts       []cronlock.JobOption
}

// TestInvalidArguments passes every kind of bad argument to New and
// AddFunc: each must come back from AddFunc as an error wrapping
// ErrInvalid that names the problem, and add nothing to the cron.
func TestInvalidArguments(t *testing.T) {
	locker := locktest.NewClient(t, newRedis(t))
	jobOpts := func(opts ...cronlock.JobOption) func(*addCall) {
		return func(a *addCall) { a.opts = opts }
	}
	tests := []struct {
		name      string
		nilCron   bool
		nilLocker bool
		opts      []cronlock.Option
		edit      func(*addCall)
		want      string
	}{
		{name: "nil cron", nilCron: true, want: "nil *cron.Cron"},
		{name: "nil locker", nilLocker: true, want: "nil lock.Locker"},
		{name: "nil option", opts: []cronlock.Option{nil}, want: "nil Option"},
		{name: "zero skew tolerance", opts: []cronlock.Option{cronlock.WithSkewTolerance(0)}, want: "skew tolerance 0s must be positive"},
		{name: "negative skew tolerance", opts: []cronlock.Option{cronlock.WithSkewTolerance(-time.Second)}, want: "skew tolerance -1s must be positive"},
		{name: "negative stop grace", opts: []cronlock.Option{cronlock.WithStopGrace(-time.Millisecond)}, want: "stop grace -1ms must not be negative"},
		{name: "nil clock", opts: []cronlock.Option{cronlock.WithClock(nil)}, want: "nil clock"},
		{name: "nil logger", opts: []cronlock.Option{cronlock.WithLogger(nil)}, want: "nil logger"},
		{name: "empty name", edit: func(a *addCall) { a.name = "" }, want: "empty job name"},
		{name: "name too long", edit: func(a *addCall) { a.name = strings.Repeat("n", cronlock.MaxNameLen+1) }, want: "longer than the maximum"},
		{name: "nil func", edit: func(a *addCall) { a.fn = nil }, want: `job "job": nil job`},
		{name: "unparsable spec", edit: func(a *addCall) { a.spec = "every second" }, want: `spec "every second"`},
		{name: "seconds field on a cron without", edit: func(a *addCall) { a.spec = "*/5 * * * * *" }, want: `spec "*/5 * * * * *"`},
		{name: "empty spec", edit: func(a *addCall) { a.spec = "" }, want: `spec ""`},
		{name: "nil job option", edit: jobOpts(nil), want: "nil JobOption"},
		{name: "zero AtMostFor", edit: jobOpts(cronlock.AtMostFor(0)), want: "AtMostFor 0s must be positive"},
		{name: "negative AtMostFor", edit: jobOpts(cronlock.AtMostFor(-time.Minute)), want: "AtMostFor -1m0s must be positive"},
		{name: "AtMostFor below the minimum lease", edit: jobOpts(cronlock.AtMostFor(lock.MinLease - 1)), want: "shorter than the minimum lease"},
		{name: "zero AtLeastFor", edit: jobOpts(cronlock.AtLeastFor(0)), want: "AtLeastFor 0s must be positive"},
		{name: "negative AtLeastFor", edit: jobOpts(cronlock.AtLeastFor(-time.Second)), want: "AtLeastFor -1s must be positive"},
		{name: "skew tolerance not below 7/8 period", opts: []cronlock.Option{cronlock.WithSkewTolerance(875 * time.Millisecond)},
			edit: func(a *addCall) { a.spec = "@every 1s" }, want: `job "job": spec "@every 1s": skew tolerance 875ms is not below 7/8 of the period 1s`},
		{name: "AtLeastFor above AtMostFor", edit: jobOpts(cronlock.AtMostFor(time.Second), cronlock.AtLeastFor(2*time.Second)),
			want: "AtLeastFor 2s is longer than AtMostFor 1s"},
		{name: "AtLeastFor of the whole period", edit: func(a *addCall) {
			a.spec = "@every 1m"
			a.opts = []cronlock.JobOption{cronlock.AtLeastFor(time.Minute)}
		},
			want: `AtLeastFor 1m0s is not shorter than the period 1m0s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cron.New() // five fields: no seconds
			var l lock.Locker = locker
			switch {
			case tt.nilCron:
				c = nil
			case tt.nilLocker:
				l = nil
			}
			s := cronlock.New(c, l, append([]cronlock.Option{cronlock.WithLogger(quiet)}, tt.opts...)...)
			defer waitStopped(t, s)
			call := addCall{spec: "@hourly", name: "job", fn: nop}
			if tt.edit != nil {
				tt.edit(&call)
			}
			_, err := s.AddFunc(call.spec, call.name, call.fn, call.opts...)
			if !errors.Is(err, cronlock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AddFunc = %v, want ErrInvalid saying %q", err, tt.want)
			}
			if c != nil && len(c.Entries()) != 0 {
				t.Fatalf("cron has %d entries after a failed AddFunc, want 0", len(c.Entries()))
			}
		})
	}
}

// TestValidArguments checks the edges that must be accepted.
func TestValidArguments(t *testing.T) {
	locker := locktest.NewClient(t, newRedis(t))
	c := cron.New(cron.WithSeconds())
	s := newScheduler(t, c, locker, nil, cronlock.WithStopGrace(0), cronlock.WithSkewTolerance(time.Nanosecond))
	for i, opts := range [][]cronlock.JobOption{
		nil,
		{cronlock.AtMostFor(lock.MinLease)},
		{cronlock.AtMostFor(time.Second), cronlock.AtLeastFor(time.Second)},
		{cronlock.AtLeastFor(4 * time.Second)},
	} {
		mustAdd(t, s, "*/5 * * * * *", uniqueName(), nop, opts...)
		if n := len(c.Entries()); n != i+1 {
			t.Fatalf("cron has %d entries after %d AddFunc calls", n, i+1)
		}
	}
	mustAdd(t, s, "@every 1m", strings.Repeat("n", cronlock.MaxNameLen), nop)
}

func TestAddJob(t *testing.T) {
	locker := locktest.NewClient(t, newRedis(t))
	c := cron.New()
	s := newScheduler(t, c, locker, nil)
	if _, err := s.AddJob("@hourly", "nil job", nil); !errors.Is(err, cronlock.ErrInvalid) {
		t.Fatalf("AddJob(nil) = %v, want ErrInvalid", err)
	}
	id, err := s.AddJob("@hourly", "job", countingJob{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Entry(id).Valid() {
		t.Fatalf("entry %d not in the cron", id)
	}
}

type countingJob struct{}

func (countingJob) Run(context.Context) error { return nil }

func TestDuplicateName(t *testing.T) {
	locker := locktest.NewClient(t, newRedis(t))
	c := cron.New()
	s := newScheduler(t, c, locker, nil)
	mustAdd(t, s, "@hourly", "report", nop)
	_, err := s.AddFunc("@daily", "report", nop)
	if !errors.Is(err, cronlock.ErrInvalid) || !strings.Contains(err.Error(), `"report": name already added`) {
		t.Fatalf("second AddFunc = %v, want ErrInvalid naming the duplicate", err)
	}
	if n := len(c.Entries()); n != 1 {
		t.Fatalf("cron has %d entries, want 1", n)
	}
	// Another Scheduler is another replica: the same name is the same job.
	other := newScheduler(t, cron.New(), locker, nil)
	mustAdd(t, other, "@hourly", "report", nop)
}
