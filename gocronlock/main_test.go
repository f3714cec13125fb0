package gocronlock_test

import (
	"context"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

func TestMain(m *testing.M) {
	if runChild() {
		return
	}
	redistest.QuietLogs()
	goleak.VerifyTestMain(m)
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

var nameSeq atomic.Int64

// uniqueName returns a job name no other caller in this process gets.
func uniqueName() string { return "job" + strconv.FormatInt(nameSeq.Add(1), 10) }

// naiveLocker is the gocron.Locker a new user writes over lock.Client:
// TryLock on the job name, released when the run ends. The control.
type naiveLocker struct{ c *lock.Client }

func (n naiveLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	_, unlock, err := n.c.TryLock(ctx, key)
	if err != nil {
		return nil, err
	}
	return naiveLock(unlock), nil
}

type naiveLock lock.UnlockFunc

func (u naiveLock) Unlock(context.Context) error { return u() }

// offsetClock is the real clock read off by a fixed offset, as a host's
// clock that is off: gocron fires by its Now.
type offsetClock struct {
	clockwork.Clock
	off time.Duration
}

func (c offsetClock) Now() time.Time                  { return time.Now().Add(c.off) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// newScheduler returns a started-later gocron scheduler shut down when the
// test ends.
func newScheduler(t testing.TB, opts ...gocron.SchedulerOption) gocron.Scheduler {
	t.Helper()
	s, err := gocron.NewScheduler(append([]gocron.SchedulerOption{gocron.WithLocation(time.UTC)}, opts...)...)
	if err != nil {
		t.Fatalf("NewScheduler: %v", err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return s
}

// newLocker returns a quiet Locker on c reporting to rec (if not nil).
func newLocker(t testing.TB, c lock.Locker, rec *recorder, opts ...gocronlock.Option) *gocronlock.Locker {
	t.Helper()
	opts = append([]gocronlock.Option{gocronlock.WithLogger(quiet)}, opts...)
	if rec != nil {
		opts = append(opts, gocronlock.WithOnAttempt(rec.add))
	}
	l, err := gocronlock.NewLocker(c, opts...)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	return l
}

// recorder collects attempts.
type recorder struct {
	mu       sync.Mutex
	attempts []gocronlock.Attempt
}

func (r *recorder) add(a gocronlock.Attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, a)
}

func (r *recorder) all() []gocronlock.Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]gocronlock.Attempt(nil), r.attempts...)
}

// count returns how many attempts ended with o.
func (r *recorder) count(o gocronlock.Outcome) int {
	n := 0
	for _, a := range r.all() {
		if a.Outcome == o {
			n++
		}
	}
	return n
}

// runLog records the runs of one job on all replicas.
type runLog struct {
	mu   sync.Mutex
	runs []runRec
}

type runRec struct {
	replica int
	start   time.Time
}

// job returns the job function of replica i: it records its start and
// works for work.
func (l *runLog) job(i int, work time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		l.add(i)
		select {
		case <-time.After(work):
		case <-ctx.Done():
		}
		return nil
	}
}

// add records that replica i starts a run now.
func (l *runLog) add(i int) {
	l.mu.Lock()
	l.runs = append(l.runs, runRec{i, time.Now()})
	l.mu.Unlock()
}

// sorted returns the runs by start.
func (l *runLog) sorted() []runRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	runs := append([]runRec(nil), l.runs...)
	sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
	return runs
}
