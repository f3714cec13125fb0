package otellock_test

import (
	"context"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

type decoKey struct{}

// decorator wraps an Observer and adds a value to every context it
// returns, as an observer that also logs might.
type decorator struct{ lock.Observer }

func (d decorator) AcquireStarted(ctx context.Context, a lock.Acquire) context.Context {
	return context.WithValue(d.Observer.AcquireStarted(ctx, a), decoKey{}, "call")
}

func (d decorator) AcquireEnded(ctx context.Context, a lock.Acquire, held context.Context) context.Context {
	if ctx.Value(decoKey{}) != "call" {
		panic("AcquireEnded without the decorated context")
	}
	hctx := d.Observer.AcquireEnded(ctx, a, held)
	if hctx == nil {
		return nil
	}
	return context.WithValue(hctx, decoKey{}, "hold")
}

// TestDecoratedObserver: an Observer behind a decorator that derives the
// contexts it returns still ends every span and brings lock.held back to
// zero.
func TestDecoratedObserver(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := locktest.NewClient(t, rdb, lock.WithObserver(decorator{tel.observer(t)}))

	outer, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42")
	inner, unlockInner := locktest.MustLock(t, locker, outer, "orders:42")
	if inner.Value(decoKey{}) != "hold" {
		t.Error("the lock context lacks the decorator's value")
	}
	if _, _, err := locker.TryLock(context.Background(), "orders:42"); err == nil {
		t.Fatal("TryLock of a held key succeeded")
	}
	if n := tel.collect(t).value(t, "lock.held", aName.String("orders"), aReentrant.Bool(true)); n != 1 {
		t.Errorf("lock.held{reentrant} = %d while held, want 1", n)
	}
	_ = unlockInner()
	_ = unlock()

	if n := len(tel.ended("lock.acquire")); n != 3 {
		t.Errorf("%d lock.acquire spans ended, want 3", n)
	}
	if n := len(tel.ended("lock.hold")); n != 2 {
		t.Errorf("%d lock.hold spans ended, want 2", n)
	}
	m := tel.collect(t)
	for _, reentrant := range []bool{false, true} {
		attrs := []attribute.KeyValue{aName.String("orders"), aReentrant.Bool(reentrant)}
		if n := m.value(t, "lock.held", attrs...); n != 0 {
			t.Errorf("lock.held{reentrant=%v} = %d after unlock, want 0", reentrant, n)
		}
		m.histogram(t, "lock.hold.duration", append(attrs, aHoldOutcome.String("released"))...)
	}
}

// firstHoldSampler records the first lock.hold span and no later one.
type firstHoldSampler struct{ holds atomic.Int32 }

func (s *firstHoldSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Name == "lock.hold" && s.holds.Add(1) > 1 {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s *firstHoldSampler) Description() string { return "first lock.hold only" }

// TestUnrecordedReentry: a re-entry that records nothing (its span is not
// sampled, no metrics) does not end the outer level's span at its unlock,
// although its lock context derives from the outer level's.
func TestUnrecordedReentry(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans), sdktrace.WithSampler(&firstHoldSampler{}))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := otellock.New(otellock.WithTracerProvider(tp), otellock.WithMeterProvider(metricnoop.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	locker := locktest.NewClient(t, rdb, lock.WithObserver(decorator{obs}))

	outer, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42")
	_, unlockInner := locktest.MustLock(t, locker, outer, "orders:42")
	_ = unlockInner()
	if n := len(tel.ended("lock.hold")); n != 0 {
		t.Fatalf("%d lock.hold spans ended by the re-entry's unlock, want 0", n)
	}
	_ = unlock()
	wantAttrs(t, tel.only(t, "lock.hold"), aReentrant.Bool(false), aHoldOutcome.String("released"))
}
