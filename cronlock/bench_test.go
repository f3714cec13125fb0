package cronlock_test

import (
	"context"
	"testing"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// BenchmarkAttempt measures one run attempt against a real redis-server,
// by outcome. "ran" takes the tick marker and the run lock, runs an empty
// job and releases the lock (the marker is released later, off the
// clock); each iteration adds a new job to a new cron first, which
// BenchmarkAddFunc measures alone. "skipped-tick-done" is the attempt of
// every replica but one: one TryLock that fails.
func BenchmarkAttempt(b *testing.B) {
	_, rdb := newReal(b)
	locker := lockerOnly{locktest.NewClient(b, rdb)}
	clock := cronlock.WithClock(newFakeClock(tick0).now)

	b.Run("ran", func(b *testing.B) {
		var stopped []context.Context
		for b.Loop() {
			c := cron.New()
			s := cronlock.New(c, locker, cronlock.WithLogger(quiet), clock)
			id, err := s.AddFunc("@every 1s", uniqueName(), nop)
			if err != nil {
				b.Fatal(err)
			}
			fire(c, id)
			stopped = append(stopped, s.Stop())
		}
		b.StopTimer()
		for _, ctx := range stopped {
			<-ctx.Done()
		}
	})

	b.Run("skipped-tick-done", func(b *testing.B) {
		rec := newRecorder()
		c := cron.New()
		s := newScheduler(b, c, locker, rec, clock)
		name := uniqueName()
		id := mustAdd(b, s, "@every 1s", name, nop)
		_, unlock, err := locker.TryLock(context.Background(), tickKey(name)) // another replica has the tick
		if err != nil {
			b.Fatal(err)
		}
		defer unlock()
		for b.Loop() {
			fire(c, id)
		}
		b.StopTimer()
		if n := rec.count(cronlock.OutcomeSkippedTickDone); n != len(rec.all()) {
			b.Fatalf("%d of %d attempts skipped-tick-done", n, len(rec.all()))
		}
	})
}

// BenchmarkAddFunc measures adding a job to a new cron, without Redis.
func BenchmarkAddFunc(b *testing.B) {
	locker := locktest.NewClient(b, newRedis(b))
	for b.Loop() {
		s := cronlock.New(cron.New(), locker, cronlock.WithLogger(quiet))
		if _, err := s.AddFunc("@every 1s", "job", nop); err != nil {
			b.Fatal(err)
		}
		s.Stop()
	}
}
