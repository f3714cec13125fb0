package gocronlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestNothingLeftAfterShutdownWhileRedisStalls runs a job every second
// on two replicas, stops Redis across a tick, and shuts the schedulers
// down and closes the lock Clients and go-redis clients while it is
// stopped: Shutdown and Close return within a few seconds, every attempt
// in the stall fails rather than runs, and no goroutine is left.
func TestNothingLeftAfterShutdownWhileRedisStalls(t *testing.T) {
	if !locktest.OwnProcess(t) {
		return
	}
	r, _ := locktest.NewRedis(t)
	fixtures := goleak.IgnoreCurrent() // the server's and its clients', ended by the cleanup
	name, rec := uniqueName(), &recorder{}
	type replica struct {
		rdb *redis.Client
		c   *lock.Client
		s   gocron.Scheduler
	}
	var replicas []replica
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
		c, err := lock.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		l := newLocker(t, c, rec)
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(l))
		if err != nil {
			t.Fatal(err)
		}
		l.DeriveHolds(s)
		if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), l.Task(func(context.Context) error { return nil }),
			gocron.WithName(name)); err != nil {
			t.Fatal(err)
		}
		s.Start()
		replicas = append(replicas, replica{rdb, c, s})
	}
	locktest.Eventually(t, 10*time.Second, "a run", func() bool { return rec.count(gocronlock.OutcomeRan) > 0 })
	before := len(rec.all())
	r.Pause()
	time.Sleep(1500 * time.Millisecond) // a tick at least, with Redis stopped
	start := time.Now()
	for _, rp := range replicas {
		if err := rp.s.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		_ = rp.c.Close()
		_ = rp.rdb.Close()
	}
	if d := time.Since(start); d > locktest.Bound(3*time.Second) {
		t.Errorf("Shutdown and Close took %v with Redis stopped", d)
	}
	r.Resume()
	for _, a := range rec.all()[before:] {
		if a.Outcome == gocronlock.OutcomeRan {
			t.Errorf("attempt %+v ran with Redis stopped", a)
		}
	}
	goleak.VerifyNone(t, fixtures)
}
