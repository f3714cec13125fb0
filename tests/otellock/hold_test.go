package otellock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// wantHoldEnd checks a lock.hold span that ended other than by a confirmed
// unlock: a failure with errType, or none when errType is "".
func wantHoldEnd(t *testing.T, s sdktrace.ReadOnlySpan, outcome, event, errType string) {
	t.Helper()
	wantAttrs(t, s, aHoldOutcome.String(outcome))
	if errType == "" {
		if s.Status().Code != codes.Unset || hasAttr(s, aErrorType) {
			t.Errorf("%s hold: status %v, error.type %v; want no failure", outcome, s.Status(), attr(t, s, aErrorType))
		}
	} else {
		wantAttrs(t, s, aErrorType.String(errType))
		if s.Status().Code != codes.Error {
			t.Errorf("%s hold: status %v, want Error", outcome, s.Status())
		}
	}
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	if (event == "") != (len(names) == 0) || (event != "" && (len(names) != 1 || names[0] != event)) {
		t.Errorf("%s hold: events %q, want %q", outcome, names, event)
	}
}

func TestLeaseLost(t *testing.T) {
	mr, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)
	ctx, request := tel.parent("request")
	defer request.End()

	// The lease must outlast both Lock calls, even slowed down by -race.
	lctx, unlock := locktest.MustLock(t, locker, ctx, "orders:42", lock.WithFixedLease(500*time.Millisecond))
	_, inner := locktest.MustLock(t, locker, lctx, "orders:42")
	mr.FastForward(time.Second)          // the key expires in Redis...
	done(t, lctx, 5*time.Second, "loss") // ...and the validity ends locally
	// unlock waits for the loss to be reported.
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("unlock after loss: %v, want ErrLost", err)
	}
	_ = inner()

	holds := tel.ended("lock.hold")
	if len(holds) != 2 {
		t.Fatalf("%d hold spans, want 2 (the level and its re-entry)", len(holds))
	}
	for _, s := range holds {
		wantHoldEnd(t, s, "lost", "lock.lost", "lock.ErrLost")
		wantAttrs(t, s, aLossReason.String("not_renewed"))
		if ev := s.Events(); len(ev) != 1 || !slices.Contains(ev[0].Attributes, aLossReason.String("not_renewed")) {
			t.Errorf("events %v, want lock.lost with reason not_renewed", ev)
		}
	}
	m := tel.collect(t)
	for _, reentrant := range []bool{false, true} {
		attrs := []attribute.KeyValue{aName.String("orders"), aReentrant.Bool(reentrant)}
		if n := m.value(t, "lock.lost", append(attrs, aLossReason.String("not_renewed"))...); n != 1 {
			t.Errorf("lock.lost{reentrant=%v} = %d, want 1", reentrant, n)
		}
		if n := m.value(t, "lock.held", attrs...); n != 0 {
			t.Errorf("lock.held{reentrant=%v} = %d after loss, want 0", reentrant, n)
		}
		m.histogram(t, "lock.hold.duration", append(attrs, aHoldOutcome.String("lost"))...)
	}
}

func TestClosedWhileHeld(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)

	lctx, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42")
	if err := locker.Close(); err != nil {
		t.Fatal(err)
	}
	done(t, lctx, time.Second, "Close")
	_ = unlock() // Close returned after reporting, but unlock is needed anyway

	wantHoldEnd(t, tel.only(t, "lock.hold"), "closed", "lock.closed", "") // Close is no failure
	m := tel.collect(t)
	attrs := []attribute.KeyValue{aName.String("orders"), aReentrant.Bool(false)}
	m.histogram(t, "lock.hold.duration", append(attrs, aHoldOutcome.String("closed"))...)
	if n := m.value(t, "lock.held", attrs...); n != 0 {
		t.Errorf("lock.held = %d after Close, want 0", n)
	}
	if n := m.value(t, "lock.lost", attrs...); n != 0 {
		t.Errorf("lock.lost = %d after Close, want 0", n)
	}
}

func TestUnlockFailure(t *testing.T) {
	mr, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)

	_, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42")
	mr.Close()
	if err := unlock(); err == nil {
		t.Fatal("unlock with Redis down succeeded")
	}

	wantHoldEnd(t, tel.only(t, "lock.hold"), "error", "", "connection_refused")
	m := tel.collect(t)
	m.histogram(t, "lock.hold.duration", aName.String("orders"), aReentrant.Bool(false),
		aHoldOutcome.String("error"), aErrorType.String("connection_refused"))
	if n := m.value(t, "lock.held", aName.String("orders"), aReentrant.Bool(false)); n != 0 {
		t.Errorf("lock.held = %d after the failed unlock, want 0", n)
	}
}

// TestLeaseLostWhileRedisPaused: against a real redis-server that stops
// answering, renewals fail and the hold is lost when its validity ends.
// The lease, 1.5 s, leaves a busy machine time to send a renewal (due at
// 500 ms) before the validity ends: with 600 ms, a watchdog held back
// 400 ms by the load of a CI run found the validity over and sent none.
func TestLeaseLostWhileRedisPaused(t *testing.T) {
	srv := redistest.Start(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, srv.Client(t))

	lctx, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42", lock.WithLease(1500*time.Millisecond))
	srv.Pause()
	start := time.Now()
	done(t, lctx, 5*time.Second, "loss")
	lostAfter := time.Since(start)
	srv.Resume()
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("unlock after loss: %v, want ErrLost", err)
	}

	if lostAfter > 3500*time.Millisecond {
		t.Errorf("loss noticed %v after Redis stopped, want within the 1.5 s lease (generous bound 3.5 s)", lostAfter)
	}
	wantHoldEnd(t, tel.only(t, "lock.hold"), "lost", "lock.lost", "lock.ErrLost")
	// Renewals time out: the error is the deadline's or the connection's.
	// A renewal waits until the validity ends, so its report may come just
	// after the loss: wait for it.
	var m metrics
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m = tel.collect(t)
		n, sets := m.total(t, "lock.renewals", aRenewalOutcome.String("error"))
		if n >= 1 && sets[0].HasValue(aErrorType) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock.renewals{error} = %d at %v 5 s after the loss, want at least 1 with error.type", n, sets)
		}
	}
	if n := m.value(t, "lock.lost", aName.String("orders"), aReentrant.Bool(false), aLossReason.String("not_renewed")); n != 1 {
		t.Errorf("lock.lost = %d, want 1", n)
	}
}
