package cronlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestAtMostForCancelsRunaway runs a job that would run forever: its
// context ends with cause ErrAtMostFor at about AtMostFor, and its lock
// is released.
func TestAtMostForCancelsRunaway(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	r := newLocalReplica(t, rdb, nil, cronlock.WithClock(newFakeClock(tick0).now))
	name := uniqueName()
	var cause error
	fire(r.c, r.add(t, name, func(ctx context.Context) error {
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	}, cronlock.AtMostFor(300*time.Millisecond)))
	a := r.rec.only(t)
	if a.Outcome != cronlock.OutcomeFailed || !errors.Is(a.Err, cronlock.ErrAtMostFor) {
		t.Fatalf("attempt: %s, %v; want failed, ErrAtMostFor", a.Outcome, a.Err)
	}
	if cause != cronlock.ErrAtMostFor {
		t.Fatalf("context cause %v, want ErrAtMostFor", cause)
	}
	if a.Duration < 250*time.Millisecond || a.Duration > 2*time.Second {
		t.Fatalf("run cancelled after %v, want about 300 ms", a.Duration)
	}
	_, unlock, err := r.locker.TryLock(context.Background(), runKey(name))
	if err != nil {
		t.Fatalf("run lock after the run: %v", err)
	}
	_ = unlock()
}

// TestAtMostForFreesHungRun runs a job that ignores its context: the
// lease ends at AtMostFor anyway, so another replica can take the job, and
// the hung run is reported failed when it returns, even with no error.
func TestAtMostForFreesHungRun(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	r := newLocalReplica(t, rdb, nil, cronlock.WithClock(newFakeClock(tick0).now))
	other := locktest.NewClient(t, rdb)
	name := uniqueName()
	started, release := make(chan time.Time, 1), make(chan struct{})
	id := r.add(t, name, func(context.Context) error {
		started <- time.Now()
		<-release
		return nil
	}, cronlock.AtMostFor(300*time.Millisecond))
	done := make(chan struct{})
	go func() {
		defer close(done)
		fire(r.c, id)
	}()
	start := <-started
	waitFree(t, other, runKey(name))
	if d := time.Since(start); d < 250*time.Millisecond || d > 2*time.Second {
		t.Fatalf("job free %v after the hung run started, want about 300 ms", d)
	}
	close(release)
	<-done
	if a := r.rec.only(t); a.Outcome != cronlock.OutcomeFailed || a.Err != cronlock.ErrAtMostFor {
		t.Fatalf("attempt: %s, %v; want failed, ErrAtMostFor", a.Outcome, a.Err)
	}
}

// TestAtLeastForKeepsLock runs a 10 ms job: with AtLeastFor its lock stays
// until AtLeastFor after the start, without it the lock is free at once.
func TestAtLeastForKeepsLock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opts      []cronlock.JobOption
		wantAtMin time.Duration // the lock must not be free before
		wantAtMax time.Duration // and must be free by
	}{
		{"without", nil, 0, 2 * time.Second},
		{"AtLeastFor", []cronlock.JobOption{cronlock.AtLeastFor(500 * time.Millisecond)}, 450 * time.Millisecond, 2500 * time.Millisecond},
		{"AtLeastFor equal to AtMostFor", []cronlock.JobOption{cronlock.AtMostFor(time.Second), cronlock.AtLeastFor(time.Second)},
			850 * time.Millisecond, 3 * time.Second}, // released at 900 ms, before the lease ends
	}
	_, rdb := newReal(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obs := &releases{}
			r := newLocalReplica(t, rdb, []lock.Option{lock.WithObserver(obs)}, cronlock.WithClock(newFakeClock(tick0).now))
			other := locktest.NewClient(t, rdb)
			name := uniqueName()
			var start time.Time
			fire(r.c, r.add(t, name, func(context.Context) error {
				start = time.Now()
				time.Sleep(10 * time.Millisecond)
				return nil
			}, tt.opts...))
			if a := r.rec.only(t); a.Outcome != cronlock.OutcomeRan {
				t.Fatalf("attempt: %s, %v; want ran", a.Outcome, a.Err)
			}
			_, unlock, err := other.TryLock(context.Background(), runKey(name))
			if tt.wantAtMin > 0 {
				if !errors.Is(err, lock.ErrNotObtained) {
					t.Fatalf("TryLock right after the run = %v, want ErrNotObtained", err)
				}
				waitFree(t, other, runKey(name))
			} else if err != nil {
				t.Fatalf("TryLock right after the run = %v, want the lock", err)
			} else {
				_ = unlock()
			}
			if d := time.Since(start); d < tt.wantAtMin || d > tt.wantAtMax {
				t.Fatalf("lock free %v after the start, want within [%v, %v]", d, tt.wantAtMin, tt.wantAtMax)
			}
			waitStopped(t, r.s) // the release has been reported
			if causes := obs.of(runKey(name)); len(causes) != 1 || causes[0] != nil {
				t.Fatalf("run lock ended with %v, want one unlock (nil), not a lapsed lease", causes)
			}
		})
	}
}

// releases is a lock.Observer that records how hold levels ended.
type releases struct {
	mu     sync.Mutex
	causes map[string][]error
}

func (o *releases) Background(ctx context.Context) context.Context { return ctx }

func (o *releases) AcquireStarted(ctx context.Context, _ lock.Acquire) context.Context { return ctx }

func (o *releases) AcquireWaiting(context.Context, lock.Acquire) {}

func (o *releases) AcquireEnded(_ context.Context, _ lock.Acquire, held context.Context) context.Context {
	return held
}

func (o *releases) Released(_ context.Context, r lock.Release) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.causes == nil {
		o.causes = make(map[string][]error)
	}
	o.causes[r.Key] = append(o.causes[r.Key], r.Cause)
}

func (o *releases) Renewed(lock.Renewal) {}

func (o *releases) of(key string) []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.causes[key]...)
}
