package cronlock_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// specReplica is one Scheduler of a fleet sharing a miniredis, with a fake
// clock and a cron fired by hand.
type specReplica struct {
	c     *cron.Cron
	s     *cronlock.Scheduler
	clock *fakeClock
	rec   *recorder
	id    cron.EntryID
}

func newSpecReplica(t *testing.T, mr *miniredis.Miniredis, spec string, start time.Time) *specReplica {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	r := &specReplica{c: cron.New(cron.WithSeconds()), clock: newFakeClock(start), rec: newRecorder()}
	r.s = cronlock.New(r.c, locktest.NewClient(t, rdb), cronlock.WithClock(r.clock.now),
		cronlock.WithSkewTolerance(300*time.Millisecond), cronlock.WithOnAttempt(r.rec.add),
		cronlock.WithLogger(slog.New(slog.DiscardHandler)))
	r.id = mustAdd(t, r.s, spec, "report", nop)
	t.Cleanup(func() { waitStopped(t, r.s) })
	return r
}

// at fires r's cron at t, as r's clock reads it, and returns the attempt.
func (r *specReplica) at(t *testing.T, tm time.Time) cronlock.Attempt {
	t.Helper()
	r.clock.set(tm)
	n := len(r.rec.all())
	fire(r.c, r.id)
	all := r.rec.all()
	if len(all) != n+1 {
		t.Fatalf("%d attempts after firing at %s, want %d", len(all), tm.Format("15:04:05.000"), n+1)
	}
	return all[n]
}

// Replicas that register one job name with different specs, as during a
// rolling deploy that changes it, take each other's ticks: a tick whose
// marker is held for a tick of the other spec runs nowhere. The specReplica
// that meets it says so (skipped-other-spec, at Error), and names the
// other tick; replicas with the same spec never do, also when one fires
// early and still finds its previous tick's marker.
func TestOtherSpecIsReported(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }

	t.Run("different specs", func(t *testing.T) {
		mr := miniredis.RunT(t)
		even := newSpecReplica(t, mr, "*/2 * * * * *", base)
		third := newSpecReplica(t, mr, "*/3 * * * * *", base)
		if a := even.at(t, sec(2)); a.Outcome != cronlock.OutcomeRan {
			t.Fatalf("tick :02 on */2 = %s (%v), want ran", a.Outcome, a.Err)
		}
		mr.FastForward(time.Second) // Redis's clock, for the marker's TTL
		a := third.at(t, sec(3))
		if a.Outcome != cronlock.OutcomeSkippedOtherSpec || !errors.Is(a.Err, cronlock.ErrOtherSpec) {
			t.Fatalf("tick :03 on */3 while */2 keeps the marker of :02 = %s (%v), want skipped-other-spec", a.Outcome, a.Err)
		}
		t.Logf("reported: %v", a.Err)
	})

	t.Run("same spec", func(t *testing.T) {
		mr := miniredis.RunT(t)
		a1 := newSpecReplica(t, mr, "@every 1s", base)
		a2 := newSpecReplica(t, mr, "@every 1s", base)
		if a := a1.at(t, sec(2)); a.Outcome != cronlock.OutcomeRan {
			t.Fatalf("tick :02 = %s (%v), want ran", a.Outcome, a.Err)
		}
		mr.FastForward(100 * time.Millisecond)
		if a := a2.at(t, sec(2.1)); a.Outcome != cronlock.OutcomeSkippedTickDone {
			t.Fatalf("tick :02 on the second specReplica = %s (%v), want skipped-tick-done", a.Outcome, a.Err)
		}
		// 200 ms ahead, the second specReplica fires for :03 while the first
		// still keeps the marker of :02: its own previous tick.
		mr.FastForward(700 * time.Millisecond)
		if a := a2.at(t, sec(3)); a.Outcome != cronlock.OutcomeSkippedTickDone {
			t.Fatalf("tick :03, 200 ms early, on the marker of :02 = %s (%v), want skipped-tick-done", a.Outcome, a.Err)
		}
	})
}
