package cronlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/lock"
)

// A job can be run now under its run lock, given a new spec, and removed
// (freeing its name); unknown names and a stopped Scheduler are refused.
func TestRunNowUpdateRemove(t *testing.T) {
	t.Parallel()
	r := newLocalReplica(t, newRedis(t), nil, cronlock.WithClock(newFakeClock(tick0).now))
	name := uniqueName()
	r.add(t, name, nop)

	a, err := r.s.RunNow(name)
	if err != nil || a.Outcome != cronlock.OutcomeRan || a.Token == 0 || !a.Tick.Equal(tick0) {
		t.Fatalf("RunNow = %+v, %v; want ran with a token, tick the time of the call", a, err)
	}
	if got := r.rec.only(t); got.Outcome != cronlock.OutcomeRan {
		t.Fatalf("callback got %s, want ran", got.Outcome)
	}
	_, unlock, err := r.locker.TryLock(context.Background(), runKey(name))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := r.s.RunNow(name); err != nil || a.Outcome != cronlock.OutcomeSkippedHeld {
		t.Fatalf("RunNow while another run holds the job = %s, %v; want skipped-held", a.Outcome, err)
	}
	_ = unlock()

	id, err := r.s.Update(name, "@every 5s", cronlock.AtMostFor(lock.MinLease*10))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.c.Entries()); n != 1 || r.c.Entry(id).ID != id {
		t.Fatalf("after Update the cron has %d entries, want the new one only", n)
	}
	fire(r.c, id)
	if as := r.rec.all(); as[len(as)-1].Outcome != cronlock.OutcomeRan {
		t.Fatalf("tick of the updated entry: %s, want ran", as[len(as)-1].Outcome)
	}
	if _, err := r.s.Update(name, "every second"); !errors.Is(err, cronlock.ErrInvalid) {
		t.Fatalf("Update with a bad spec = %v, want ErrInvalid", err)
	}
	if n := len(r.c.Entries()); n != 1 {
		t.Fatalf("a refused Update left %d entries", n)
	}

	if err := r.s.Remove(name); err != nil {
		t.Fatal(err)
	}
	if n := len(r.c.Entries()); n != 0 {
		t.Fatalf("after Remove the cron has %d entries", n)
	}
	r.add(t, name, nop) // the name is free again

	for _, call := range []func() error{
		func() error { return r.s.Remove("nope") },
		func() error { _, err := r.s.Update("nope", "@every 1s"); return err },
		func() error { _, err := r.s.RunNow("nope"); return err },
	} {
		if err := call(); !errors.Is(err, cronlock.ErrUnknownJob) {
			t.Fatalf("unknown name: %v, want ErrUnknownJob", err)
		}
	}
	waitStopped(t, r.s)
	if _, err := r.s.RunNow(name); !errors.Is(err, cronlock.ErrStopped) {
		t.Fatalf("RunNow after Stop = %v, want ErrStopped", err)
	}
}

// Removing a job's entry from the wrapped cron (c.Remove) removes the
// job: its name can be added again, and Update, RunNow and Remove no
// longer know it.
func TestCronRemoveFreesName(t *testing.T) {
	t.Parallel()
	r := newLocalReplica(t, newRedis(t), nil, cronlock.WithClock(newFakeClock(tick0).now))
	name := uniqueName()
	r.c.Remove(r.add(t, name, nop))
	if _, err := r.s.RunNow(name); !errors.Is(err, cronlock.ErrUnknownJob) {
		t.Errorf("RunNow of a job removed from the cron: %v, want ErrUnknownJob", err)
	}
	if _, err := r.s.Update(name, "@every 1s"); !errors.Is(err, cronlock.ErrUnknownJob) {
		t.Errorf("Update of a job removed from the cron: %v, want ErrUnknownJob", err)
	}
	id, err := r.s.AddFunc("@every 1s", name, nop)
	if err != nil {
		t.Fatalf("AddFunc after c.Remove: %v, want the name free", err)
	}
	fire(r.c, id)
	if a := r.rec.only(t); a.Outcome != cronlock.OutcomeRan {
		t.Fatalf("re-added job: %s, %v; want ran", a.Outcome, a.Err)
	}
	r.c.Remove(id)
	if err := r.s.Remove(name); !errors.Is(err, cronlock.ErrUnknownJob) {
		t.Errorf("Remove of a job removed from the cron: %v, want ErrUnknownJob", err)
	}
}
