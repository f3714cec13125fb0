package otellock_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// The spans of one lock under a request's span, recorded in memory.
func Example() {
	mr, _ := miniredis.Run() // an embedded Redis; use your own in production
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	spans := tracetest.NewSpanRecorder() // in production: an exporter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	obs, err := otellock.New(otellock.WithTracerProvider(tp)) // metrics: the global MeterProvider
	if err != nil {
		panic(err)
	}
	locker, err := lock.New(rdb, lock.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx, request := tp.Tracer("shop").Start(context.Background(), "POST /orders/:id/pay")
	// The lock's name in telemetry: its kind, not the order's number.
	lctx, unlock, err := locker.Lock(ctx, "orders:42", lock.WithName("orders:{id}"))
	if err != nil {
		panic(err)
	}
	_, charge := tp.Tracer("shop").Start(lctx, "charge card") // a child of lock.hold
	charge.End()
	_ = unlock()
	request.End()

	for _, s := range spans.Ended() {
		var attrs []string
		for _, kv := range s.Attributes() {
			if kv.Key != "lock.acquire.wait_time" && kv.Key != "lock.fencing_token" { // vary
				attrs = append(attrs, string(kv.Key)+"="+kv.Value.Emit())
			}
		}
		fmt.Println(strings.Join(append([]string{s.Name()}, attrs...), " "))
	}
	// Output:
	// lock.acquire lock.name=orders:{id} lock.reentrant=false lock.kind=lock lock.operation=lock lock.acquire.outcome=acquired lock.acquire.waited=false
	// charge card
	// lock.hold lock.name=orders:{id} lock.reentrant=false lock.kind=lock lock.hold.outcome=released
	// POST /orders/:id/pay
}
