package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/lock"
)

// Every replica of a service runs this at start-up; the cleanup runs once
// every five minutes across all of them.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	client, err := lock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	locker, err := gocronlock.NewLocker(client, gocronlock.WithOnAttempt(func(a gocronlock.Attempt) {
		if a.Outcome == gocronlock.OutcomeFailed || a.Outcome == gocronlock.OutcomeLost {
			log.Printf("%s: %s: %v", a.Job, a.Outcome, a.Err)
		}
	}))
	if err != nil {
		log.Fatal(err)
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		log.Fatal(err)
	}
	locker.DeriveHolds(s) // minimum hold: half of each job's interval
	_, err = s.NewJob(gocron.CronJob("0 */5 * * * *", true),
		locker.Task(func(ctx context.Context) error {
			token, _ := lock.FencingToken(ctx, "gocronlock:run:cleanup") // for writes from this run only
			return cleanup(ctx, token)
		}),
		gocron.WithName("cleanup"),
		gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, name string, err error) {
			if !errors.Is(err, gocronlock.ErrTickDone) && !errors.Is(err, gocronlock.ErrHeld) {
				log.Printf("%s not run: %v", name, err) // Redis failed
			}
		})))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	defer s.Shutdown() // lets runs finish; before client.Close

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done() // serve until interrupted
}

func cleanup(context.Context, uint64) error { return nil }

func ExampleNewLocker_errors() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // not contacted: NewLocker checks its arguments only
	defer rdb.Close()
	client, _ := lock.New(rdb)
	defer client.Close()

	_, err := gocronlock.NewLocker(client, gocronlock.WithMinHold(time.Millisecond))
	fmt.Println(err)
	_, err = gocronlock.NewLocker(nil)
	fmt.Println(errors.Is(err, lock.ErrInvalid))
	fmt.Println(gocronlock.OutcomeSkippedTickDone)
	// Output:
	// lock: invalid argument: gocronlock: minimum hold 1ms below 20ms
	// true
	// skipped-tick-done
}
