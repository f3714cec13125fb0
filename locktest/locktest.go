// Package locktest helps test code that uses package lock without a Redis
// server: [New] gives a [*lock.Client] on an embedded Redis (miniredis),
// [Lose] makes a held lock be lost, so that the code's handling of
// [lock.ErrLost] runs, and [Contend] runs a function from many goroutines
// at once.
//
//	func TestCharge(t *testing.T) {
//		locker := locktest.New(t)
//		locktest.Contend(t, 8, func(i int) error {
//			return charge(context.Background(), locker, "orders:42")
//		})
//		// assert the order was charged once
//	}
//
// The embedded Redis runs the same scripts as a real one, so locking,
// re-entry, waiting in turn and fencing tokens behave as in production;
// it does not expire keys as time passes (a lock whose holder stops
// renewing is not freed by the clock): test expiry against a real Redis.
package locktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// New returns a Client on an embedded Redis of its own, with opts. The
// Client and the Redis are closed when the test ends (the Client first,
// so its unlocks reach the Redis). It fails the test if opts are invalid.
func New(t testing.TB, opts ...lock.Option) *lock.Client {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	c, err := lock.New(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		t.Fatalf("locktest: lock.New: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = rdb.Close()
	})
	return c
}

// Lose makes the hold of key be lost, as when its lease ends in Redis
// (it uses [lock.Client.ForceUnlock]): when client is the holder's
// Client, the lock contexts of key are cancelled with cause
// [lock.ErrLost] before Lose returns; their unlock functions return
// ErrLost, and the key goes to the next waiter, with a larger fencing
// token. It fails the test when no one holds key.
func Lose(t testing.TB, client *lock.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.ForceUnlock(ctx, key); err != nil {
		t.Fatalf("locktest: Lose(%q): %v", key, err)
	}
}

// Contend runs f(i) for i in [0, n) from n goroutines started together,
// waits for all of them, and fails the test with every error f returned.
// Use it to check that code under a lock stays correct when many callers
// want the lock at once.
func Contend(t testing.TB, n int, f func(i int) error) {
	t.Helper()
	if n < 1 {
		t.Fatalf("locktest: Contend with %d goroutines", n)
	}
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Errorf("locktest: Contend: %v", err)
	}
}
