package otellock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestWaiting: a Lock that finds the key held counts in lock.waiting
// until it gets the key, and its lock.acquire span says that it waited
// and where it stood in the queue.
func TestWaiting(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)
	name := aName.String("orders")

	_, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42")
	got := make(chan lock.UnlockFunc)
	go func() {
		_, unlockW, err := locker.Lock(context.Background(), "orders:42", lock.WithMaxWait(5*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- unlockW
	}()
	for deadline := time.Now().Add(5 * time.Second); tel.collect(t).value(t, "lock.waiting", name) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("lock.waiting did not reach 1 within 5 s")
		}
	}
	_ = unlock()
	if unlockW := <-got; unlockW != nil {
		_ = unlockW()
	}
	if n := tel.collect(t).value(t, "lock.waiting", name); n != 0 {
		t.Errorf("lock.waiting = %d after the wait, want 0", n)
	}

	acquires := tel.ended("lock.acquire")
	if len(acquires) != 2 {
		t.Fatalf("%d lock.acquire spans, want 2", len(acquires))
	}
	wantAttrs(t, acquires[0], aWaited.Bool(false))
	if hasAttr(acquires[0], aQueuePosition) {
		t.Errorf("the first acquisition did not wait but has %s", aQueuePosition)
	}
	wantAttrs(t, acquires[1], aWaited.Bool(true), aQueuePosition.Int(1), aAcquireOutcome.String("acquired"))
}

// TestClaimLapsedCounted: a Lock call that lost its place in the queue
// (Acquire.Lapses, here 2) adds that to lock.claim.lapsed under its
// lock.name; calls without lapses add nothing.
func TestClaimLapsedCounted(t *testing.T) {
	tel := newTelemetry(t)
	obs := tel.observer(t)
	for _, lapses := range []int{2, 0} {
		a := lock.Acquire{Key: "orders:42", Name: "orders"}
		ctx := obs.AcquireStarted(context.Background(), a)
		a.Waited, a.Lapses, a.Outcome = true, lapses, lock.OutcomeTimeout
		obs.AcquireEnded(ctx, a, nil)
	}
	if n := tel.collect(t).value(t, "lock.claim.lapsed", aName.String("orders")); n != 2 {
		t.Errorf("lock.claim.lapsed = %d, want 2", n)
	}
}
