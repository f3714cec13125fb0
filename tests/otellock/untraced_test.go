package otellock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// tracingHook traces every Redis command as go-redis's OpenTelemetry
// instrumentation does: a client span started from the command's context.
type tracingHook struct {
	tracer   trace.Tracer
	unsample atomic.Int64 // commands whose span did not record
}

func (h *tracingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tracingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		ctx, span := h.start(ctx, cmd.Name())
		defer span.End()
		return next(ctx, cmd)
	}
}

func (h *tracingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		ctx, span := h.start(ctx, "pipeline")
		defer span.End()
		return next(ctx, cmds)
	}
}

func (h *tracingHook) start(ctx context.Context, name string) (context.Context, trace.Span) {
	ctx, span := h.tracer.Start(ctx, "redis "+name, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		h.unsample.Add(1)
	}
	return ctx, span
}

// traceRedis makes rdb's commands spans of tel.
func traceRedis(tel *telemetry, rdb *redis.Client) *tracingHook {
	h := &tracingHook{tracer: tel.tp.Tracer("redis")}
	rdb.AddHook(h)
	return h
}

// roots returns the ended spans without a parent.
func roots(tel *telemetry) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if !s.Parent().IsValid() {
			out = append(out, s)
		}
	}
	return out
}

// TestBackgroundWorkStartsNoTrace: with a tracing Redis client and the
// parent-based sampler docs/observability.md asks for (the SDK's default,
// set here so that OTEL_TRACES_SAMPLER cannot change it), the commands of
// an acquisition are children of lock.acquire and those of the unlock
// children of lock.hold, while the watchdog's renewals start no trace and
// join none: they are metrics only, and no recorded span has a parent that
// was never recorded.
func TestBackgroundWorkStartsNoTrace(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { _ = tel.tp.Shutdown(context.Background()) })
	hook := traceRedis(tel, rdb)
	locker := tel.locker(t, rdb)
	ctx, request := tel.parent("request")

	lctx, unlock := locktest.MustLock(t, locker, ctx, "orders:42", lock.WithLease(150*time.Millisecond))
	for deadline := time.Now().Add(5 * time.Second); tel.collect(t).value(t, "lock.renewals", aRenewalOutcome.String("renewed")) < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3 renewals within 5 s")
		}
	}
	if lctx.Err() != nil {
		t.Fatalf("lease lost: %v", context.Cause(lctx))
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	request.End()
	if err := locker.Close(); err != nil {
		t.Fatal(err)
	}

	if r := roots(tel); len(r) != 1 || r[0].Name() != "request" {
		t.Errorf("root spans %v, want only the request", spanNames(r))
	}
	if n := hook.unsample.Load(); n < 3 {
		t.Errorf("%d Redis commands were not recorded, want the renewals' (3 or more)", n)
	}
	// Each Redis span descends, through Redis spans (a new connection's
	// set-up is a child of the first command), from lock.acquire or
	// lock.hold.
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range tel.spans.Ended() {
		byID[s.SpanContext().SpanID()] = s
	}
	for _, s := range tel.spans.Ended() {
		if p := s.Parent(); p.IsValid() && byID[p.SpanID()] == nil {
			t.Errorf("span %s has a parent that was never recorded (trace %s)", s.Name(), p.TraceID())
		}
		if !strings.HasPrefix(s.Name(), "redis ") {
			continue
		}
		p := s
		for p != nil && strings.HasPrefix(p.Name(), "redis ") {
			p = byID[p.Parent().SpanID()]
		}
		if p == nil || (p.Name() != "lock.acquire" && p.Name() != "lock.hold") {
			t.Errorf("Redis span %s does not descend from lock.acquire or lock.hold", s.Name())
		}
	}
}

// TestCleanupsStartNoTrace: with a tracing
// Redis client, the cleanups after a cancelled wait, a wait limit, a lost
// hold and Close start no trace: every span is in the request's trace.
// The subscription's connection is made by whichever comes first, the
// Client's receive loop or its SUBSCRIBE: both run under the Client's
// life context, so its HELLO and CLIENT SETINFO start no trace either
// (lock's TestEveryCommandUnderObserverContexts checks every command,
// also after a Redis restart, at the level of the Observer contract).
func TestCleanupsStartNoTrace(t *testing.T) {
	mr, rdb := newMini(t)
	tel := newTelemetry(t)
	traceRedis(tel, rdb)
	locker := tel.locker(t, rdb)
	ctx, request := tel.parent("request")
	everyEnd(t, tel, locker, ctx, mr)
	request.End()
	if r := roots(tel); len(r) != 1 {
		t.Errorf("root spans %v, want only the request", spanNames(r))
	}
}

// TestInternalLocks: a lock taken with lock.Integration.Internal gets metrics but
// no span, and its Redis commands start no trace; WithInternalSpans
// traces it as any other lock.
func TestInternalLocks(t *testing.T) {
	for _, spans := range []bool{false, true} {
		_, rdb := newMini(t)
		tel := newTelemetry(t)
		traceRedis(tel, rdb)
		var opts []otellock.Option
		if spans {
			opts = append(opts, otellock.WithInternalSpans())
		}
		locker := tel.locker(t, rdb, opts...)
		_, unlock := locktest.MustLock(t, locker, context.Background(), "marker:1", lock.Integration{}.Internal(), lock.WithName("marker"))
		if n := tel.collect(t).value(t, "lock.held", aName.String("marker"), aReentrant.Bool(false)); n != 1 {
			t.Errorf("spans %v: lock.held = %d while held, want 1", spans, n)
		}
		_ = unlock()

		m := tel.collect(t)
		if n := m.value(t, "lock.acquire.outcomes", aName.String("marker"), aOperation.String("lock"),
			aAcquireOutcome.String("acquired"), aReentrant.Bool(false)); n != 1 {
			t.Errorf("spans %v: lock.acquire.outcomes = %d, want 1", spans, n)
		}
		m.histogram(t, "lock.hold.duration", aName.String("marker"), aReentrant.Bool(false), aHoldOutcome.String("released"))
		got := spanNames(tel.spans.Ended())
		if !spans && len(got) != 0 {
			t.Errorf("internal lock: spans %v, want none", got)
		}
		if spans && (len(tel.ended("lock.acquire")) != 1 || len(tel.ended("lock.hold")) != 1) {
			t.Errorf("internal lock WithInternalSpans: spans %v, want lock.acquire and lock.hold", got)
		}
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name()
	}
	return names
}
