package cronlock_test

import (
	"context"
	"sync"
	"testing"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/lock"
)

// A job's locks, its run lock and its tick marker, carry one lock name
// for telemetry, "cronlock:<job>", so that a fleet of jobs uses one name
// per job of otellock's cap; the marker is marked internal.
func TestOneLockNamePerJob(t *testing.T) {
	t.Parallel()
	obs := &acquires{}
	r := newLocalReplica(t, newRedis(t), []lock.Option{lock.WithObserver(obs)}, cronlock.WithClock(newFakeClock(tick0).now))
	name := uniqueName()
	fire(r.c, r.add(t, name, nop))
	if a := r.rec.only(t); a.Outcome != cronlock.OutcomeRan {
		t.Fatalf("attempt: %s, %v; want ran", a.Outcome, a.Err)
	}
	got := obs.all()
	want := map[string]bool{runKey(name): false, tickKey(name): true} // key: internal
	if len(got) != len(want) {
		t.Fatalf("acquisitions %+v, want one per key of %v", got, want)
	}
	for _, a := range got {
		internal, ok := want[a.Key]
		if !ok || a.Name != "cronlock:"+name || a.Internal != internal {
			t.Errorf("acquisition of %q: name %q, internal %v; want name %q, internal %v", a.Key, a.Name, a.Internal, "cronlock:"+name, internal)
		}
	}
}

// acquires is a lock.Observer that records acquisition attempts.
type acquires struct {
	mu sync.Mutex
	as []lock.Acquire
}

func (o *acquires) Background(ctx context.Context) context.Context { return ctx }

func (o *acquires) AcquireStarted(ctx context.Context, a lock.Acquire) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.as = append(o.as, a)
	return ctx
}

func (o *acquires) AcquireWaiting(context.Context, lock.Acquire) {}

func (o *acquires) AcquireEnded(_ context.Context, _ lock.Acquire, held context.Context) context.Context {
	return held
}

func (o *acquires) Released(context.Context, lock.Release) {}

func (o *acquires) Renewed(lock.Renewal) {}

func (o *acquires) all() []lock.Acquire {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]lock.Acquire(nil), o.as...)
}
