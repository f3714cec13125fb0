package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/lock"
)

// The schedulers the demo's settle job can run on (-cron).
const (
	cronRobfig = "robfig" // robfig/cron with cronlock
	cronGocron = "gocron" // gocron v2 with gocronlock
)

// scheduler is a replica's cron, whichever library runs it.
type scheduler interface {
	start()
	stop() // stops firing and waits for running jobs
}

// newScheduler makes replica's scheduler of kind with the settle job every
// second, once per tick across the replicas.
func (s *shop) newScheduler(kind string, locker *lock.Client) (scheduler, error) {
	if kind == cronGocron {
		return s.newGocron(locker)
	}
	// The replicas share this process's clock, so a small skew tolerance is
	// honest here, and it leaves a late cron the most room: 600 ms for a job
	// every second (see cronlock.WithSkewTolerance).
	cs := cronlock.New(cron.New(cron.WithSeconds()), locker,
		cronlock.WithSkewTolerance(200*time.Millisecond),
		cronlock.WithLogger(slog.New(slog.DiscardHandler)),
		cronlock.WithOnAttempt(func(a cronlock.Attempt) { s.attempt(a.Outcome.String()) }))
	if _, err := cs.AddFunc("@every 1s", "settle", func(ctx context.Context) error {
		tick, _ := cronlock.Tick(ctx)
		return s.settle(ctx, tick)
	}); err != nil {
		return nil, err
	}
	return robfigScheduler{cs}, nil
}

type robfigScheduler struct{ s *cronlock.Scheduler }

func (r robfigScheduler) start() { r.s.Start() }
func (r robfigScheduler) stop()  { <-r.s.Stop().Done() }

// newGocron is newScheduler on gocron: a job every whole second, whose
// minimum hold gocronlock derives from the schedule (half a second).
func (s *shop) newGocron(locker *lock.Client) (scheduler, error) {
	l, err := gocronlock.NewLocker(locker, gocronlock.WithLogger(slog.New(slog.DiscardHandler)),
		gocronlock.WithOnAttempt(func(a gocronlock.Attempt) { s.attempt(a.Outcome.String()) }))
	if err != nil {
		return nil, err
	}
	gs, err := gocron.NewScheduler(gocron.WithDistributedLocker(l))
	if err != nil {
		return nil, err
	}
	l.DeriveHolds(gs)
	_, err = gs.NewJob(gocron.CronJob("* * * * * *", true), l.Task(func(ctx context.Context) error {
		return s.settle(ctx, time.Now().Truncate(time.Second)) // the second it fired for
	}), gocron.WithName("settle"))
	if err != nil {
		_ = gs.Shutdown()
		return nil, fmt.Errorf("gocron job: %w", err)
	}
	return gocronScheduler{gs}, nil
}

type gocronScheduler struct{ s gocron.Scheduler }

func (g gocronScheduler) start() { g.s.Start() }
func (g gocronScheduler) stop()  { _ = g.s.Shutdown() }
