package lock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

func Example() {
	// ContextTimeoutEnabled is recommended: go-redis then stops a call at
	// its context's deadline itself, and a lone call of the Client runs on
	// the caller's goroutine (docs/operations.md).
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()

	locker, err := lock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx, unlock, err := locker.Lock(context.Background(), "orders:42")
	if err != nil {
		panic(err)
	}
	defer unlock()
	// Pass the token to storage that rejects writes with a smaller one.
	token, ok := lock.FencingToken(ctx, "orders:42")
	fmt.Println("held:", lock.Held(ctx, "orders:42"), "token:", ok && token > 0)
	// Prints: held: true token: true
}

func ExampleClient_TryLock() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, _ := lock.New(rdb)
	defer locker.Close()

	_, unlock, _ := locker.Lock(context.Background(), "report")
	defer unlock()

	// Another request, with its own context, does not wait.
	_, _, err := locker.TryLock(context.Background(), "report")
	var busy *lock.NotObtainedError
	if errors.As(err, &busy) {
		fmt.Println("busy for up to", busy.RemainingLease)
	}
	// Prints: busy for up to 30s
}

func ExampleClient_Lock_reentry() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, _ := lock.New(rdb)
	defer locker.Close()

	ctx, unlock, _ := locker.Lock(context.Background(), "account:7")
	// A function called with the held context may lock the key again
	// without waiting; each unlock releases one level.
	inner, unlockInner, _ := locker.Lock(ctx, "account:7")
	fmt.Println(lock.Held(inner, "account:7"))
	_ = unlockInner()
	fmt.Println(lock.Held(ctx, "account:7"))
	_ = unlock()
	fmt.Println(lock.Held(ctx, "account:7"))
	// Prints true, true, false.
}

func ExampleClient_Acquire() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, _ := lock.New(rdb)
	defer locker.Close()

	// At most 3 report generations per tenant at a time, across replicas.
	ctx, release, err := locker.Acquire(context.Background(), "reports:acme", 3)
	if err != nil {
		panic(err)
	}
	defer release()
	fmt.Println("held:", lock.Held(ctx, "reports:acme"))
	// Prints: held: true
}

func ExampleClient_RLock() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, _ := lock.New(rdb)
	defer locker.Close()

	// Readers share the key; a Lock of the same key, its writer, waits for
	// them, and readers that come after a queued writer wait for it.
	_, runlock, _ := locker.RLock(context.Background(), "config")
	_, runlock2, _ := locker.RLock(context.Background(), "config")
	defer runlock()
	defer runlock2()

	_, _, err := locker.TryLock(context.Background(), "config")
	fmt.Println("writer while reading:", errors.Is(err, lock.ErrNotObtained))
	// Prints: writer while reading: true
}
