package otellock_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestNoOrphanTraceWithAlwaysOnSampler (review of issue 18, item 2): many
// deployments sample every span in the SDK (AlwaysSample) and decide in
// the collector (tail sampling). There, the unsampled parent that
// Observer.Background puts under the Client's own Redis commands is no
// mark at all: the SDK records the renewals' spans anyway, all of them,
// for the Observer's whole life, in one trace (the parent's fixed trace
// ID) under a parent span that never exists. Backends show that as a
// single ever-growing broken trace, and a tail sampler keeps it open
// forever. Background work must not join one endless trace with a
// missing parent, whatever the sampler: each recorded span's parent is a
// span that was recorded, or it has none.
func TestNoOrphanTraceWithAlwaysOnSampler(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tel.tp.Shutdown(context.Background()) })
	traceRedis(tel, rdb)
	locker := tel.locker(t, rdb)

	lctx, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42", lock.WithLease(150*time.Millisecond))
	for deadline := time.Now().Add(5 * time.Second); tel.collect(t).value(t, "lock.renewals", aRenewalOutcome.String("renewed")) < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3 renewals within 5 s")
		}
	}
	if lctx.Err() != nil {
		t.Fatalf("lease lost: %v", context.Cause(lctx))
	}
	_ = unlock()
	if err := locker.Close(); err != nil {
		t.Fatal(err)
	}

	recorded := map[trace.SpanID]bool{}
	for _, s := range tel.spans.Ended() {
		recorded[s.SpanContext().SpanID()] = true
	}
	orphans := map[trace.TraceID]int{}
	for _, s := range tel.spans.Ended() {
		if p := s.Parent(); p.IsValid() && !recorded[p.SpanID()] {
			orphans[p.TraceID()]++
		}
	}
	if len(orphans) != 0 {
		t.Errorf("spans whose parent was never recorded, by trace: %v", orphans)
	}
}
