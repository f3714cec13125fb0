// Command basic shows lock, unlock, re-entry and fencing tokens.
//
// It runs against an embedded Redis by default; set -redis or REDIS_URL to
// use a real one:
//
//	go run ./examples/basic
//	go run ./examples/basic -redis redis://127.0.0.1:6379/0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/examples/internal/embedded"
	"github.com/lockkit/lockkit/lock"
)

func main() {
	url := flag.String("redis", os.Getenv("REDIS_URL"), "Redis URL; empty: embedded Redis")
	flag.Parse()
	if err := run(*url); err != nil {
		log.Fatal(err)
	}
}

func run(url string) error {
	opt, stop, err := embedded.Redis(url)
	if err != nil {
		return err
	}
	defer stop()
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	locker, err := lock.New(rdb)
	if err != nil {
		return err
	}
	defer locker.Close()

	ctx, unlock, err := locker.Lock(context.Background(), "orders:42")
	if err != nil {
		return err
	}
	token, _ := lock.FencingToken(ctx, "orders:42")
	fmt.Println("locked orders:42, fencing token", token)

	// Re-entry: the held context locks the key again without waiting.
	_, unlockInner, err := locker.Lock(ctx, "orders:42")
	if err != nil {
		return err
	}
	fmt.Println("re-entered orders:42")

	// Another context contends; TryLock does not wait.
	_, _, err = locker.TryLock(context.Background(), "orders:42")
	fmt.Println("other caller:", err, "| is ErrNotObtained:", errors.Is(err, lock.ErrNotObtained))

	if err := unlockInner(); err != nil {
		return err
	}
	if err := unlock(); err != nil {
		return err
	}
	fmt.Println("unlocked; second unlock says:", unlock())

	ctx, unlock, err = locker.TryLock(context.Background(), "orders:42")
	if err != nil {
		return err
	}
	defer unlock()
	token, _ = lock.FencingToken(ctx, "orders:42")
	fmt.Println("locked again, fencing token", token)
	return nil
}
