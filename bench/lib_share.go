package main

import (
	"context"
	"fmt"
	"math"

	"github.com/lockkit/lockkit/lock"
)

// The rows of issue 33's scenarios: lockkit taking keys as a lock, as a
// semaphore and as readers, each through the same locker so that only the
// call differs.

// asLock is lockkit's Lock.
var asLock = library{name: "Lock", holders: 1, open: openTaking(
	func(c *lock.Client, ctx context.Context, key string) (context.Context, lock.UnlockFunc, error) {
		return c.Lock(ctx, key)
	})}

// asReaders is lockkit's RLock: any number of readers hold a key at once.
var asReaders = library{name: "RLock", holders: math.MaxInt, open: openTaking(
	func(c *lock.Client, ctx context.Context, key string) (context.Context, lock.UnlockFunc, error) {
		return c.RLock(ctx, key)
	})}

// asSemaphore is lockkit's Acquire with limit permits per key.
func asSemaphore(limit int) library {
	return library{name: fmt.Sprintf("Acquire, limit %d", limit), holders: limit, open: openTaking(
		func(c *lock.Client, ctx context.Context, key string) (context.Context, lock.UnlockFunc, error) {
			return c.Acquire(ctx, key, limit)
		})}
}
