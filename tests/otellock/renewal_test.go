package otellock_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestRenewals(t *testing.T) {
	mr, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)

	// A 600 ms lease is renewed every 200 ms.
	lctx, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42", lock.WithLease(600*time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for tel.collect(t).value(t, "lock.renewals", aRenewalOutcome.String("renewed")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no renewal within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mr.FlushAll() // the owner is gone: the next renewal finds out
	done(t, lctx, 5*time.Second, "loss")
	_ = unlock() // returns once the loss has been reported

	// The batch that found the loss is reported once it is processed, which
	// may be just after the lock context ended: wait for it.
	var m metrics
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m = tel.collect(t); m.value(t, "lock.renewals", aRenewalOutcome.String("lost")) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no lost renewal reported within 5 s of the loss")
		}
	}
	if n := m.value(t, "lock.renewals", aRenewalOutcome.String("lost")); n != 1 {
		t.Errorf("lock.renewals{lost} = %d, want 1", n)
	}
	if p := m.histogram(t, "lock.renewal.duration"); p.Count < 2 {
		t.Errorf("lock.renewal.duration count %d, want at least 2 batches", p.Count)
	}
	wantHoldEnd(t, tel.only(t, "lock.hold"), "lost", "lock.lost", "lock.ErrLost")
}

func TestRenewalFailure(t *testing.T) {
	mr, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)

	lctx, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42", lock.WithLease(600*time.Millisecond))
	mr.Close() // Redis down: renewals fail until the validity ends
	done(t, lctx, 5*time.Second, "loss")
	_ = unlock() // returns once the loss has been reported

	// The error is the dial's or the renewal's timeout, depending on timing;
	// a renewal that waited until the validity ended may report just after
	// the loss: wait for it.
	var n int64
	var sets []attribute.Set
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if n, sets = tel.collect(t).total(t, "lock.renewals", aRenewalOutcome.String("error")); n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock.renewals{error} = %d 5 s after the loss, want at least 1", n)
		}
	}
	for _, set := range sets {
		if v, _ := set.Value(aErrorType); v.AsString() == "" {
			t.Errorf("failed renewals without error.type: %s", set.Encoded(attribute.DefaultEncoder()))
		}
	}
	wantHoldEnd(t, tel.only(t, "lock.hold"), "lost", "lock.lost", "lock.ErrLost")
}
