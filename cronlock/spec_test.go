package cronlock_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// specReplica is a Scheduler on its own lock Client and cron (seconds
// field, UTC), fired by hand, with the clock now.
type specReplica struct {
	l   *lock.Client
	c   *cron.Cron
	s   *cronlock.Scheduler
	rec *recorder
	id  cron.EntryID
}

func newSpecReplica(t *testing.T, rdb redis.UniversalClient, spec, name string, now func() time.Time, opts ...cronlock.Option) *specReplica {
	t.Helper()
	r := &specReplica{c: cron.New(cron.WithSeconds(), cron.WithLocation(time.UTC)), rec: newRecorder()}
	opts = append([]cronlock.Option{cronlock.WithClock(now)}, opts...)
	r.l = locktest.NewClient(t, rdb)
	r.s = newScheduler(t, r.c, lockerOnly{r.l}, r.rec, opts...)
	r.id = mustAdd(t, r.s, spec, name, nop)
	return r
}

// newSpecReplicaOnRedisTime is newSpecReplica keeping time by Redis's
// clock, srv's, set to clk's time: its offset is measured, 0. Its cron
// is stopped: it is fired by hand.
func newSpecReplicaOnRedisTime(t *testing.T, srv *fakeRedisTime, spec, name string, clk *fakeClock, opts ...cronlock.Option) *specReplica {
	t.Helper()
	r := &specReplica{c: cron.New(cron.WithSeconds(), cron.WithLocation(time.UTC)), rec: newRecorder()}
	r.l = locktest.NewClient(t, srv.rdb)
	r.s = newScheduler(t, r.c, srv.locker(r.l), r.rec, append([]cronlock.Option{cronlock.WithClock(clk.now)}, opts...)...)
	r.id = mustAdd(t, r.s, spec, name, nop)
	// Start between ticks (the cron runs until stopped), at the same time
	// by both clocks.
	now := clk.now()
	clk.set(now.Add(-time.Hour + 500*time.Millisecond))
	srv.SetTime(clk.now())
	r.s.Start()
	<-r.c.Stop().Done()
	clk.set(now)
	if off, ok := r.s.ClockOffset(); !ok || off != 0 {
		t.Fatalf("offset to Redis's clock %v, %v; want 0, true", off, ok)
	}
	return r
}

// fireAt sets clk to tm, fires r and returns its attempt.
func (r *specReplica) fireAt(t *testing.T, clk *fakeClock, tm time.Time) cronlock.Attempt {
	t.Helper()
	clk.set(tm)
	n := len(r.rec.all())
	fire(r.c, r.id)
	all := r.rec.all()
	if len(all) != n+1 {
		t.Fatalf("%d attempts after firing, want %d", len(all), n+1)
	}
	return all[n]
}

// Replicas that register one job name with different specs, as during a
// rolling deploy that changes it, take each other's ticks: a tick whose
// marker is held for a tick of the other spec runs nowhere. The specReplica
// that meets it, on Redis's time, says so (skipped-other-spec, at Error),
// and names the other tick; replicas with the same spec never do, also
// when one fires early and still finds its previous tick's marker.
func TestOtherSpecIsReported(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }

	replica := func(t *testing.T, rdb redis.UniversalClient, spec string) (*specReplica, *fakeClock) {
		clk := newFakeClock(base)
		return newSpecReplica(t, rdb, spec, "report", clk.now, cronlock.WithSkewTolerance(300*time.Millisecond),
			cronlock.WithLogger(slog.New(slog.DiscardHandler))), clk
	}
	t.Run("different specs", func(t *testing.T) {
		srv := newFakeRedisTime(t, base)
		onRedisTime := func(spec string) (*specReplica, *fakeClock) {
			clk := newFakeClock(base)
			return newSpecReplicaOnRedisTime(t, srv, spec, "report", clk, cronlock.WithSkewTolerance(300*time.Millisecond),
				cronlock.WithLogger(slog.New(slog.DiscardHandler))), clk
		}
		even, evenClock := onRedisTime("*/2 * * * * *")
		third, thirdClock := onRedisTime("*/3 * * * * *")
		if a := even.fireAt(t, evenClock, sec(2)); a.Outcome != cronlock.OutcomeRan {
			t.Fatalf("tick :02 on */2 = %s (%v), want ran", a.Outcome, a.Err)
		}
		srv.FastForward(time.Second) // Redis's clock, for the marker's TTL
		a := third.fireAt(t, thirdClock, sec(3))
		if a.Outcome != cronlock.OutcomeSkippedOtherSpec || !errors.Is(a.Err, cronlock.ErrOtherSpec) {
			t.Fatalf("tick :03 on */3 while */2 keeps the marker of :02 = %s (%v), want skipped-other-spec", a.Outcome, a.Err)
		}
		t.Logf("reported: %v", a.Err)
	})

	t.Run("same spec", func(t *testing.T) {
		srv, rdb := locktest.NewRedis(t)
		a1, c1 := replica(t, rdb, "@every 1s")
		a2, c2 := replica(t, rdb, "@every 1s")
		if a := a1.fireAt(t, c1, sec(2)); a.Outcome != cronlock.OutcomeRan {
			t.Fatalf("tick :02 = %s (%v), want ran", a.Outcome, a.Err)
		}
		srv.FastForward(100 * time.Millisecond)
		if a := a2.fireAt(t, c2, sec(2.1)); a.Outcome != cronlock.OutcomeSkippedTickDone {
			t.Fatalf("tick :02 on the second specReplica = %s (%v), want skipped-tick-done", a.Outcome, a.Err)
		}
		// 200 ms ahead, the second specReplica fires for :03 while the first
		// still keeps the marker of :02: its own previous tick.
		srv.FastForward(700 * time.Millisecond)
		if a := a2.fireAt(t, c2, sec(3)); a.Outcome != cronlock.OutcomeSkippedTickDone {
			t.Fatalf("tick :03, 200 ms early, on the marker of :02 = %s (%v), want skipped-tick-done", a.Outcome, a.Err)
		}
	})
}
