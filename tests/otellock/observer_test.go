package otellock_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// TestNoExtraRedisCommands: observing costs no Redis command.
func TestNoExtraRedisCommands(t *testing.T) {
	commands := func(observed bool) int {
		mr, rdb := newMini(t)
		tel := newTelemetry(t)
		locker := locktest.NewClient(t, rdb)
		if observed {
			locker = tel.locker(t, rdb)
		}
		ctx, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42")
		_, unlockInner := locktest.MustLock(t, locker, ctx, "orders:42")
		if _, _, err := locker.TryLock(context.Background(), "orders:42"); err == nil {
			t.Fatal("TryLock of a held key succeeded")
		}
		_ = unlockInner()
		_ = unlock()
		if observed && len(tel.spans.Ended()) != 5 {
			t.Fatalf("%d spans, want 5", len(tel.spans.Ended()))
		}
		return mr.CommandCount()
	}
	if without, with := commands(false), commands(true); with != without {
		t.Errorf("%d Redis commands with the Observer, %d without", with, without)
	}
}

func TestInstrumentationScope(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	_, unlock := locktest.MustLock(t, tel.locker(t, rdb), context.Background(), "orders:42")
	_ = unlock()

	// A release version, also in a build inside the module's repository,
	// where the toolchain's build information has none.
	if otellock.ScopeName != "github.com/lockkit/lockkit/otellock" || !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(otellock.Version()) {
		t.Fatalf("ScopeName %q, Version %q", otellock.ScopeName, otellock.Version())
	}
	for _, s := range tel.spans.Ended() {
		if sc := s.InstrumentationScope(); sc.Name != otellock.ScopeName || sc.Version != otellock.Version() || sc.SchemaURL != semconv.SchemaURL {
			t.Errorf("span %s has scope %+v", s.Name(), sc)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 {
		t.Fatalf("%d metric scopes, want 1", len(rm.ScopeMetrics))
	}
	if sc := rm.ScopeMetrics[0].Scope; sc.Name != otellock.ScopeName || sc.Version != otellock.Version() || sc.SchemaURL != semconv.SchemaURL {
		t.Errorf("metrics have scope %+v", sc)
	}
}

// TestLockContextKeepsWorking: the context the Observer hands to the
// caller carries the ownership and ends at unlock, whatever the providers.
func TestLockContextKeepsWorking(t *testing.T) {
	for _, bc := range observerCases() {
		t.Run(bc.name, func(t *testing.T) {
			_, rdb := newMini(t)
			obs, err := otellock.New(bc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			locker := locktest.NewClient(t, rdb, lock.WithObserver(obs))
			lctx, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42")
			inner, unlockInner := locktest.MustLock(t, locker, lctx, "orders:42")
			outerTok, _ := lock.FencingToken(lctx, "orders:42")
			if tok, ok := lock.FencingToken(inner, "orders:42"); !ok || tok == 0 || tok != outerTok || !lock.Held(lctx, "orders:42") {
				t.Errorf("Held %v, FencingToken %d %v; want true, the outer level's %d, true", lock.Held(lctx, "orders:42"), tok, ok, outerTok)
			}
			if err := unlockInner(); err != nil {
				t.Fatal(err)
			}
			done(t, inner, time.Second, "inner unlock")
			if lctx.Err() != nil {
				t.Fatal("the outer level ended with the inner one")
			}
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
			done(t, lctx, time.Second, "unlock")
		})
	}
}

// TestTracesOrMetricsAlone: with one of the providers a no-op, the other
// still gets everything.
func TestTracesOrMetricsAlone(t *testing.T) {
	for _, traces := range []bool{true, false} {
		_, rdb := newMini(t)
		tel := newTelemetry(t)
		opt := otellock.WithMeterProvider(metricnoop.NewMeterProvider())
		if !traces {
			opt = otellock.WithTracerProvider(tracenoop.NewTracerProvider())
		}
		locker := tel.locker(t, rdb, opt)
		outer, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42")
		_, unlockInner := locktest.MustLock(t, locker, outer, "orders:42")
		_ = unlockInner()
		_ = unlock()

		spans, m := tel.spans.Ended(), tel.collect(t)
		if traces {
			if len(spans) != 4 || len(m) != 0 {
				t.Errorf("traces only: %d spans, %d metrics; want 4, 0", len(spans), len(m))
			}
			continue
		}
		if len(spans) != 0 {
			t.Errorf("metrics only: %d spans", len(spans))
		}
		for _, reentrant := range []bool{false, true} {
			attrs := []attribute.KeyValue{aName.String("orders"), aReentrant.Bool(reentrant)}
			m.histogram(t, "lock.hold.duration", append(attrs, aHoldOutcome.String("released"))...)
			m.histogram(t, "lock.acquire.duration", append(attrs, aOperation.String("lock"), aAcquireOutcome.String("acquired"))...)
			if n := m.value(t, "lock.held", attrs...); n != 0 {
				t.Errorf("metrics only: lock.held{reentrant=%v} = %d after unlock", reentrant, n)
			}
		}
	}
}
