package otellock_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// Lock contention in traces and metrics: an Observer on the global
// TracerProvider and MeterProvider, and each lock named after its kind.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	obs, err := otellock.New() // the global providers; see WithTracerProvider, WithMeterProvider
	if err != nil {
		panic(err)
	}
	locker, err := lock.New(rdb, lock.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	// lock.acquire, then lock.hold until unlock, under ctx's span (the
	// request's, with otelgin or otelhttp).
	ctx := context.Background()
	lctx, unlock, err := locker.Lock(ctx, "orders:42", lock.WithName("orders:{id}"))
	if err != nil {
		panic(err)
	}
	defer unlock()
	_ = lctx // the order's work runs under lctx
}

func ExampleDefaultLockName() {
	for _, key := range []string{"orders:42", "users:alice:cart", "cron:nightly-report:1700000000", "billing", "9f86d081"} {
		fmt.Printf("%-31s → %s\n", key, otellock.DefaultLockName(key))
	}
	// Output:
	// orders:42                       → orders
	// users:alice:cart                → users
	// cron:nightly-report:1700000000  → cron
	// billing                         → billing
	// 9f86d081                        → _OTHER
}

func ExampleWithLockName() {
	// Keys "tenants:<tenant>:<resource>:<id>": name locks by resource,
	// whatever the tenant; the default would name them all "tenants".
	byResource := func(key string) string {
		if rest, ok := strings.CutPrefix(key, "tenants:"); ok {
			_, key, _ = strings.Cut(rest, ":")
		}
		return otellock.DefaultLockName(key)
	}
	obs, err := otellock.New(otellock.WithLockName(byResource))
	if err != nil {
		panic(err)
	}
	_ = obs // lock.New(rdb, lock.WithObserver(obs))
	fmt.Println(byResource("tenants:acme:invoices:42"))
	// Output: invoices
}
