package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestClose(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	mr, rdb := locktest.NewRedis(t)
	before := goleak.IgnoreCurrent()
	c, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	held, unlock := locktest.MustLock(t, c, ctx, "k")
	done, waiting := lockAsync(c, ctx, "k")
	locktest.Eventually(t, 5*time.Second, "the waiter subscribed", func() bool { return len(mr.PubSubChannels("lockkit:{k}:released:*")) == 1 })

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if cause := context.Cause(held); cause != lock.ErrClosed {
		t.Fatalf("held ctx cause = %v, want ErrClosed", cause)
	}
	locktest.Within(t, done, time.Second, "waiter woken by Close")
	if !errors.Is(waiting.err, lock.ErrClosed) {
		t.Fatalf("waiting Lock = %v, want ErrClosed", waiting.err)
	}
	goleak.VerifyNone(t, before)

	if _, _, err := c.Lock(ctx, "x"); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Lock after Close = %v", err)
	}
	if _, _, err := c.TryLock(ctx, "x"); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("TryLock after Close = %v", err)
	}
	if err := c.Close(); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	// Close released the key, so others need not wait for the lease; the
	// unlock function reports that Close ended the hold.
	if locktest.Held(t, rdb, "lockkit:{k}") {
		t.Fatal("key kept after Close")
	}
	if err := unlock(); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("unlock after Close = %v, want ErrClosed", err)
	}
	if err := unlock(); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second unlock after Close = %v, want ErrNotHeld", err)
	}
}
