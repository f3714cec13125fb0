package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Lock, TryLock and unlock: the basic calls.

func TestLockUnlock(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()

	lctx, unlock := locktest.MustLock(t, c, ctx, "orders:42")
	if !lock.Held(lctx, "orders:42") {
		t.Fatal("Held(lock ctx) = false")
	}
	if lock.Held(ctx, "orders:42") {
		t.Fatal("Held(parent ctx) = true")
	}
	if !locktest.Held(t, rdb, "lockkit:{orders:42}") {
		t.Fatalf("lock key missing; keys %v", mr.Keys())
	}
	if ttl := mr.TTL("lockkit:{orders:42}"); ttl > lock.DefaultLease || ttl < lock.DefaultLease-5*time.Second {
		t.Fatalf("TTL = %v, want the lease, %v", ttl, lock.DefaultLease)
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if locktest.Held(t, rdb, "lockkit:{orders:42}") {
		t.Fatal("lock key still there after unlock")
	}
	if lctx.Err() == nil {
		t.Fatal("lock ctx not cancelled after unlock")
	}
	if ctx.Err() != nil {
		t.Fatal("parent ctx cancelled by unlock")
	}
	if lock.Held(lctx, "orders:42") {
		t.Fatal("Held after unlock")
	}
	if err := unlock(); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second unlock = %v, want ErrNotHeld", err)
	}
}

func TestTryLockContended(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "k", lock.WithLease(10*time.Second))
	defer unlock()

	cc := locktest.CountCommands(rdb)
	_, _, err := c.TryLock(ctx, "k")
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock = %v, want ErrNotObtained", err)
	}
	var ne *lock.NotObtainedError
	if !errors.As(err, &ne) || ne.RemainingLease <= 9*time.Second || ne.RemainingLease > 10*time.Second {
		t.Fatalf("TryLock error %#v: want RemainingLease in (9s, 10s]", ne)
	}
	if n := cc.N(); n != 1 {
		t.Fatalf("TryLock sent %d commands, want 1", n)
	}
}

func TestConcurrentUnlockCalls(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	_, unlock := locktest.MustLock(t, c, context.Background(), "k")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- unlock()
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, lock.ErrNotHeld):
			t.Fatalf("unlock: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d unlocks succeeded, want 1", ok)
	}
}
