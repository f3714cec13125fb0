package otellock_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// The kind of an acquisition: lock.kind on spans always, on metrics for
// permits and read holds, with a semaphore's lock.limit.

const (
	aKind  = attribute.Key("lock.kind")
	aLimit = attribute.Key("lock.limit")
)

// TestSemaphorePermitsCarryKindAndLimit: a permit's spans and metric
// points carry lock.kind=semaphore and lock.limit; lock.held counts the
// permits this process holds of the name, a re-entry apart.
func TestSemaphorePermitsCarryKindAndLimit(t *testing.T) {
	tel := newTelemetry(t)
	locker := tel.locker(t, redistest.Start(t).Client(t))
	ctx := context.Background()
	kind := []attribute.KeyValue{aName.String("reports"), aKind.String("semaphore"), aLimit.Int(3)}
	held := func(reentrant bool) int64 {
		return tel.collect(t).value(t, "lock.held", append(kind, aReentrant.Bool(reentrant))...)
	}

	actx, unlockA, err := locker.Acquire(ctx, "reports:acme", 3)
	if err != nil {
		t.Fatal(err)
	}
	_, unlockB, err := locker.Acquire(ctx, "reports:acme", 3)
	if err != nil {
		t.Fatal(err)
	}
	_, unlockA2, err := locker.Acquire(actx, "reports:acme", 3) // a re-entry: no permit
	if err != nil {
		t.Fatal(err)
	}
	if n, r := held(false), held(true); n != 2 || r != 1 {
		t.Fatalf("lock.held = %d permits and %d re-entries, want 2 and 1", n, r)
	}
	token := tokenOf(t, actx, "reports:acme")
	for _, unlock := range []lock.UnlockFunc{unlockA2, unlockA, unlockB} {
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
	}
	if n := held(false); n != 0 {
		t.Fatalf("lock.held = %d after the unlocks, want 0", n)
	}

	acquires := tel.ended("lock.acquire")
	if len(acquires) != 3 {
		t.Fatalf("%d lock.acquire spans, want 3", len(acquires))
	}
	wantAttrs(t, acquires[0], aKind.String("semaphore"), aLimit.Int(3), aOperation.String("lock"), aAcquireOutcome.String("acquired"), aToken.Int64(token))
	wantAttrs(t, tel.ended("lock.hold")[0], aKind.String("semaphore"), aLimit.Int(3), aReentrant.Bool(true))
	m := tel.collect(t)
	if n := m.value(t, "lock.acquire.outcomes", append(kind, aOperation.String("lock"), aAcquireOutcome.String("acquired"), aReentrant.Bool(false))...); n != 2 {
		t.Errorf("lock.acquire.outcomes of permits = %d, want 2", n)
	}
	if p := m.histogram(t, "lock.hold.duration", append(kind, aReentrant.Bool(false), aHoldOutcome.String("released"))...); p.Count != 2 {
		t.Errorf("lock.hold.duration of permits: %d points, want 2", p.Count)
	}
}

// TestReadHoldsAndWaitingReaderCarryKind: read holds, a busy TryRLock and
// a reader waiting behind a writer carry lock.kind=read and no limit; the
// writer's points have no lock.kind, as a lock's always had.
func TestReadHoldsAndWaitingReaderCarryKind(t *testing.T) {
	tel := newTelemetry(t)
	locker := tel.locker(t, redistest.Start(t).Client(t))
	ctx := context.Background()
	read := []attribute.KeyValue{aName.String("config"), aKind.String("read")}

	_, unlockW := locktest.MustLock(t, locker, ctx, "config:app")
	_, _, err := locker.TryRLock(context.Background(), "config:app") // another context: busy
	if err == nil {
		t.Fatal("TryRLock with a writer succeeded")
	}
	got := make(chan lock.UnlockFunc, 1)
	go func() {
		_, unlock, err := locker.RLock(ctx, "config:app", lock.WithMaxWait(5*time.Second))
		if err != nil {
			t.Error(err)
			unlock = func() error { return nil }
		}
		got <- unlock
	}()
	locktest.Eventually(t, 5*time.Second, "a waiting reader", func() bool { return tel.collect(t).value(t, "lock.waiting", read...) == 1 })
	if err := unlockW(); err != nil {
		t.Fatal(err)
	}
	unlockR := <-got
	if n := tel.collect(t).value(t, "lock.held", append(read, aReentrant.Bool(false))...); n != 1 {
		t.Errorf("lock.held of read holds = %d, want 1", n)
	}
	if err := unlockR(); err != nil {
		t.Fatal(err)
	}

	m := tel.collect(t)
	if n := m.value(t, "lock.acquire.outcomes", append(read, aOperation.String("try_lock"), aAcquireOutcome.String("busy"), aReentrant.Bool(false))...); n != 1 {
		t.Errorf("busy TryRLock in lock.acquire.outcomes = %d, want 1", n)
	}
	if n := m.value(t, "lock.acquire.outcomes", aName.String("config"), aOperation.String("lock"), aAcquireOutcome.String("acquired"), aReentrant.Bool(false)); n != 1 {
		t.Errorf("the writer's lock.acquire.outcomes without lock.kind = %d, want 1", n)
	}
	for _, s := range tel.ended("lock.acquire") {
		if hasAttr(s, aLimit) {
			t.Errorf("span %s of a lock or read hold has %s", s.Name(), aLimit)
		}
	}
	acquires := tel.ended("lock.acquire")
	wantAttrs(t, acquires[0], aKind.String("lock"))
	wantAttrs(t, acquires[1], aKind.String("read"), aAcquireOutcome.String("busy"))
	wantAttrs(t, acquires[2], aKind.String("read"), aWaited.Bool(true), aAcquireOutcome.String("acquired"))
}
