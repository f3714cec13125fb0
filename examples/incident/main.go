// Command incident is a payments worker for the worked incident of
// docs/operations.md ("Operating locks"): it takes the lock of an order,
// works, then writes the order's status to a store in Redis that rejects
// writes with an older fencing token than the last it accepted.
//
// With -work longer than its lease and no look at its lock context, it is
// the stuck holder an operator force-unlocks with the lockkit command; its
// late write is then rejected. It needs a real Redis (-redis or REDIS_URL):
//
//	go run ./examples/incident -label payments-7f9c -work 12s &
//	go run ./examples/incident -label payments-a1b2 &
//	lockkit show orders:42
//	lockkit unlock --force orders:42
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// fenced writes a status with a token unless the store has seen a larger
// one: {1, last} when written, {0, last} when refused.
var fenced = redis.NewScript(`
local last = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if tonumber(ARGV[1]) < last then return {0, last} end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'status', ARGV[2])
return {1, last}`)

type config struct {
	url, label, key string
	lease, work     time.Duration
}

func main() {
	var cfg config
	flag.StringVar(&cfg.url, "redis", os.Getenv("REDIS_URL"), "Redis URL")
	flag.StringVar(&cfg.label, "label", "payments-1", "owner label of the worker's Client")
	flag.StringVar(&cfg.key, "key", "orders:42", "lock key; the store is store:<key>")
	flag.DurationVar(&cfg.lease, "lease", 15*time.Second, "lease")
	flag.DurationVar(&cfg.work, "work", time.Second, "how long the work takes; the worker does not look at its lock context meanwhile (a stuck call)")
	flag.Parse()
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "incident:", err)
		os.Exit(1)
	}
}

// errRejected is returned when the store refused the worker's write.
var errRejected = errors.New("write rejected by the store")

func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.url == "" {
		return errors.New("a real Redis is needed: -redis or REDIS_URL")
	}
	opt, err := redis.ParseURL(cfg.url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c, err := lock.New(rdb, lock.WithOwnerLabel(cfg.label), lock.WithDefaultLease(cfg.lease))
	if err != nil {
		return err
	}
	defer c.Close()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "%s  %s: %s\n", time.Now().Format("15:04:05.000"), cfg.label, fmt.Sprintf(format, args...))
	}
	lctx, unlock, err := c.Lock(ctx, cfg.key)
	if err != nil {
		return err
	}
	tok, _ := lock.FencingToken(lctx, cfg.key)
	say("holds %s with token %d", cfg.key, tok)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		<-lctx.Done()
		say("lock context ended: %v", context.Cause(lctx))
	}()
	time.Sleep(cfg.work) // the work, blind to lctx
	res, err := fenced.Run(ctx, rdb, []string{"store:" + cfg.key}, tok, "paid by "+cfg.label).Int64Slice()
	if err != nil {
		return err
	}
	if res[0] == 1 {
		say("write with token %d accepted", tok)
	} else {
		say("write with token %d REJECTED: the store has seen token %d", tok, res[1])
		err = errRejected
	}
	say("unlock: %v", unlock())
	<-ended
	return err
}
