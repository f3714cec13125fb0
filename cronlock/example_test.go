package cronlock_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/lock"
)

// Every replica of a service runs this at start-up; the cleanup runs once
// every five minutes across all of them.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locker, err := lock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	s := cronlock.New(cron.New(cron.WithSeconds()), locker,
		cronlock.WithOnAttempt(func(a cronlock.Attempt) {
			if a.Outcome == cronlock.OutcomeFailed {
				log.Printf("cleanup of %v failed: %v", a.Tick, a.Err)
			}
		}))
	_, err = s.AddFunc("0 */5 * * * *", "cleanup", func(ctx context.Context) error {
		token, _ := cronlock.FencingToken(ctx) // for writes that must come from this run only
		return cleanup(ctx, token)
	}, cronlock.AtMostFor(4*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	defer func() { <-s.Stop().Done() }() // lets runs finish, then releases their locks

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done() // serve until interrupted
}

func cleanup(context.Context, uint64) error { return nil }

func ExampleScheduler_AddFunc_errors() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // not contacted: AddFunc checks its arguments only
	defer rdb.Close()
	locker, _ := lock.New(rdb)
	defer locker.Close()
	s := cronlock.New(cron.New(), locker, cronlock.WithLogger(slog.New(slog.DiscardHandler)))
	defer s.Stop()

	job := func(context.Context) error { return nil }
	_, err := s.AddFunc("*/10 * * * * *", "sync", job) // this cron has no seconds field
	fmt.Println(err)
	_, err = s.AddFunc("@hourly", "report", job, cronlock.AtMostFor(time.Minute), cronlock.AtLeastFor(time.Hour))
	fmt.Println(err)
	// Output:
	// cronlock: invalid argument: job "sync": spec "*/10 * * * * *": expected exactly 5 fields, found 6: [*/10 * * * * *]
	// cronlock: invalid argument: job "report": AtLeastFor 1h0m0s is longer than AtMostFor 1m0s
}
