// Command demo shows the whole kit at work in one run: three replicas of
// a small order service, each with its own lock.Client, serve
// POST /orders/:id/pay behind ginlock on 127.0.0.1 (ginlock.Idempotent
// replays a payment's first answer to its retries, ginlock.New locks the
// order) and run a cron job
// every second (robfig/cron with cronlock, or gocron v2 with gocronlock:
// -cron gocron), all traced by otellock. The demo drives concurrent HTTP
// payments at them, with many duplicates per order, then reports and
// checks what matters: every order paid exactly once, no two payments of
// an order at once, every cron tick run once, no lease lost. The replicas
// also elect one leader (package leader) for singleton work; at the end
// the leader's replica stops, as in a rolling deploy, and another must
// lead within a second, no two terms ever at once. Its clients
// act as real ones: answered 409 (the order is being paid by another
// request) or 503 (the lock service did not answer in time, as on a busy
// host), they ask again after the answer's Retry-After, a few times at
// most; each payment must end with a 200 within that budget. Each payment
// carries an Idempotency-Key, and a client that waits too long for its
// first answer sends the request again, as a mobile client does: the
// retry gets 409 while the first request runs and its answer, replayed,
// once it is done; no key pays twice.
//
// It runs against an embedded Redis by default; -redis (or REDIS_URL)
// points it at a real one, where it writes only under a fresh key prefix:
//
//	go run ./examples/demo
//	go run ./examples/demo -redis redis://127.0.0.1:6379/0 -duration 30s
//	go run ./examples/demo -serve   # keep the replicas up for curl afterwards
//	go run ./examples/demo -cron gocron
//
// It exits with status 1 if an invariant did not hold.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// config is what the flags set.
type config struct {
	redisURL    string        // empty: embedded Redis
	duration    time.Duration // how long to drive load
	replicas    int
	concurrency int // concurrent HTTP clients
	orders      int // new orders per second of load
	payTime     time.Duration
	serve       bool   // keep serving after the report, until interrupted
	cron        string // the scheduler of the cron job: cronRobfig or cronGocron
}

func main() {
	cfg := config{payTime: 20 * time.Millisecond, cron: cronRobfig}
	flag.StringVar(&cfg.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (redis://host:port/db); empty: embedded Redis")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to drive load")
	flag.IntVar(&cfg.replicas, "replicas", 3, "replicas of the order service")
	flag.IntVar(&cfg.concurrency, "concurrency", 64, "concurrent HTTP clients")
	flag.IntVar(&cfg.orders, "orders", 10, "new order ids per second of load; every client picks among the current ones")
	flag.BoolVar(&cfg.serve, "serve", false, "keep the replicas running after the report until interrupted")
	flag.StringVar(&cfg.cron, "cron", cronRobfig, "the cron job's scheduler: robfig (robfig/cron with cronlock) or gocron (gocron v2 with gocronlock)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, cfg, os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	if !rep.ok() {
		os.Exit(1)
	}
}

func (c config) validate() error {
	switch {
	case c.duration < time.Second:
		return fmt.Errorf("-duration %v: at least 1s", c.duration)
	case c.replicas < 1:
		return errors.New("-replicas: at least 1")
	case c.concurrency < 1:
		return errors.New("-concurrency: at least 1")
	case c.orders < 1:
		return errors.New("-orders: at least 1")
	case c.cron != cronRobfig && c.cron != cronGocron:
		return fmt.Errorf("-cron %q: robfig or gocron", c.cron)
	}
	return nil
}

// run starts the replicas, drives the load, prints the report to out and
// returns it.
func run(ctx context.Context, cfg config, out io.Writer) (*report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "lockkit demo: starting Redis and %d replicas...\n", cfg.replicas)
	f, err := startFleet(cfg)
	if err != nil {
		return nil, err
	}
	defer f.close()
	fmt.Fprintf(out, "lockkit demo: %d replicas on %s, %d concurrent clients for %v, %s; a line a second:\n",
		cfg.replicas, f.listenAddrs(), cfg.concurrency, cfg.duration, f.redisName)
	orders, answers, payments := drive(ctx, cfg, f.urls(), out)
	f.stopCron()
	hand := f.handOverLeader(ctx)
	rep := newReport(orders, answers, payments, f.shop, f.spans.Ended())
	rep.leader = hand
	rep.print(out)
	if cfg.serve && ctx.Err() == nil {
		fmt.Fprintf(out, "\nserving until interrupted; try:\n  curl -i -X POST %s/orders/42/pay\n", f.urls()[0])
		<-ctx.Done()
	}
	return rep, nil
}
