// Command otel traces and measures locks with OpenTelemetry. It prints
// spans and metrics to stdout and, when OTEL_EXPORTER_OTLP_ENDPOINT is set,
// also sends them there over OTLP/HTTP. It uses an embedded Redis unless
// -redis or REDIS_URL names one:
//
//	go run ./examples/otel
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 go run ./examples/otel -redis redis://127.0.0.1:6379/0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/examples/internal/embedded"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

func main() {
	url := flag.String("redis", os.Getenv("REDIS_URL"), "Redis URL; empty: embedded Redis")
	flag.Parse()
	if err := run(context.Background(), *url, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string, out io.Writer) (err error) {
	tp, mp, err := providers(ctx, out)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tp.Shutdown(ctx), mp.Shutdown(ctx)) }() // flushes
	opt, stop, err := embedded.Redis(url)
	if err != nil {
		return err
	}
	defer stop()
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	obs, err := otellock.New(otellock.WithTracerProvider(tp), otellock.WithMeterProvider(mp))
	if err != nil {
		return err
	}
	locker, err := lock.New(rdb, lock.WithObserver(obs))
	if err != nil {
		return err
	}
	defer locker.Close()

	// A request: lock.acquire and lock.hold are children of its span.
	ctx, request := tp.Tracer("example").Start(ctx, "POST /orders/:id/pay")
	defer request.End()
	lctx, unlock, err := locker.Lock(ctx, "orders:42")
	if err != nil {
		return err
	}
	defer unlock()
	_, work := tp.Tracer("example").Start(lctx, "charge card") // a child of lock.hold
	work.End()
	// Another caller finds the key held: outcome busy, not an error.
	if _, _, err := locker.TryLock(context.Background(), "orders:42"); !errors.Is(err, lock.ErrNotObtained) {
		return fmt.Errorf("TryLock of a held key: %v", err)
	}
	return nil
}
