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

// TestBackgroundWorkStartsNoTrace: with a tracing Redis client, the
// commands of an acquisition are children of lock.acquire and those of
// the unlock children of lock.hold, while the watchdog's renewals start
// no trace: they are metrics only.
func TestBackgroundWorkStartsNoTrace(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
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

// TestInternalLocks: a lock taken with lock.WithInternal gets metrics but
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
		_, unlock := locktest.MustLock(t, locker, context.Background(), "marker:1", lock.WithInternal(), lock.WithName("marker"))
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
