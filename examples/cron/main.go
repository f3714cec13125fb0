// Command cron runs one job on three replicas that share a Redis: every
// tick runs on one replica, and the others say why they skipped it.
//
// It runs against an embedded Redis by default; set -redis or REDIS_URL to
// use a real one:
//
//	go run ./examples/cron
//	go run ./examples/cron -redis redis://127.0.0.1:6379/0 -for 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/examples/internal/embedded"
	"github.com/lockkit/lockkit/lock"
)

func main() {
	url := flag.String("redis", os.Getenv("REDIS_URL"), "Redis URL; empty: embedded Redis")
	d := flag.Duration("for", 5*time.Second, "how long to run")
	flag.Parse()
	if err := run(*url, *d, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(url string, d time.Duration, w io.Writer) error {
	opt, stop, err := embedded.Redis(url)
	if err != nil {
		return err
	}
	defer stop()
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	var mu sync.Mutex // one line at a time
	var replicas []*cronlock.Scheduler
	for i := range 3 { // in production: one per process
		locker, err := lock.New(rdb)
		if err != nil {
			return err
		}
		defer locker.Close()
		s := cronlock.New(cron.New(cron.WithSeconds()), locker,
			cronlock.WithLogger(slog.New(slog.DiscardHandler)), // the callback prints instead
			cronlock.WithOnAttempt(func(a cronlock.Attempt) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(w, "%s replica %d: %s\n", a.Tick.Format(time.TimeOnly), i, a.Outcome)
			}))
		_, err = s.AddFunc("@every 1s", "report", func(ctx context.Context) error {
			return nil // the work; ctx is cancelled if the lock is lost or AtMostFor passes
		}, cronlock.AtMostFor(5*time.Second))
		if err != nil {
			return err
		}
		s.Start()
		replicas = append(replicas, s)
	}
	time.Sleep(d)
	for _, s := range replicas {
		<-s.Stop().Done() // lets the runs finish and releases their locks
	}
	return nil
}
