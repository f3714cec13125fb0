package otellock

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/lock"
)

// acquireCtx carries one acquisition from AcquireStarted to AcquireEnded:
// the caller's context with the lock.acquire span. It is made only when
// something records the acquisition, and found with Value, so that an
// observer wrapping this one may derive contexts from it.
type acquireCtx struct {
	context.Context
	span      trace.Span // nil when the lock gets no spans
	recording bool       // span records: lock.hold links to it
	name      attribute.KeyValue
	waitOpt   metric.AddOption // lock.waiting's attributes; nil when it was not incremented
}

type acquireKey struct{}

func (ac *acquireCtx) Value(key any) any {
	if key == (acquireKey{}) {
		return ac
	}
	return ac.Context.Value(key)
}

// AcquireStarted starts the lock.acquire span as a child of ctx's span.
// An internal lock ([lock.Integration.Internal]) gets none unless
// [WithInternalSpans] was given, and its Redis commands start no trace
// (see [Observer.Background]). It implements [lock.Observer].
func (o *Observer) AcquireStarted(ctx context.Context, a lock.Acquire) context.Context {
	var span trace.Span
	if o.traced(a) {
		ctx, span = o.tracer.Start(ctx, "lock.acquire")
	} else {
		ctx = o.untraced(ctx)
	}
	recording := span != nil && span.IsRecording()
	if !recording && !o.m.acquireDuration.Enabled(ctx) && !o.m.acquireOutcomes.Enabled(ctx) && !o.m.waiting.Enabled(ctx) && !o.m.lapsed.Enabled(ctx) {
		return ctx // a span that does not record needs no End
	}
	name := o.lockName(a)
	if recording {
		span.SetAttributes(append(o.spanAttrs(name, a), operation(a.Try))...)
	}
	return &acquireCtx{Context: ctx, span: span, recording: recording, name: name}
}

// AcquireWaiting counts the call in lock.waiting until it ends. It
// implements [lock.Observer].
func (o *Observer) AcquireWaiting(ctx context.Context, a lock.Acquire) {
	ac, _ := ctx.Value(acquireKey{}).(*acquireCtx)
	if ac == nil || ac.waitOpt != nil || !o.m.waiting.Enabled(ac) {
		return
	}
	ac.waitOpt = metric.WithAttributeSet(kindSet(a.Kind, a.Limit, ac.name))
	o.m.waiting.Add(ac, 1, ac.waitOpt)
}

// AcquireEnded ends the lock.acquire span and records the acquisition's
// metrics. When the lock was obtained it starts the lock.hold span, a child
// of the caller's span, and returns held with that span in it, so that the
// spans of the critical section are its children. It implements
// [lock.Observer].
func (o *Observer) AcquireEnded(ctx context.Context, a lock.Acquire, held context.Context) context.Context {
	var name attribute.KeyValue // computed when needed
	var link *trace.Link
	if ac, ok := ctx.Value(acquireKey{}).(*acquireCtx); ok {
		name = ac.name
		if ac.recording {
			link = &trace.Link{SpanContext: ac.span.SpanContext()}
		}
		if ac.span != nil {
			o.endAcquireSpan(ac.span, a)
		}
		if ac.waitOpt != nil {
			o.m.waiting.Add(ac, -1, ac.waitOpt)
		}
		if a.Lapses > 0 && o.m.lapsed.Enabled(ac) {
			o.m.lapsed.Add(ac, int64(a.Lapses), metric.WithAttributeSet(kindSet(a.Kind, a.Limit, ac.name)))
		}
		o.recordAcquire(ac, a)
	}
	if held == nil {
		return nil
	}
	return o.startHold(held, a, name, link)
}

func (o *Observer) endAcquireSpan(span trace.Span, a lock.Acquire) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		keyAcquireOutcome.String(a.Outcome.String()),
		keyWaitTime.Float64(a.Wait.Seconds()),
		keyWaited.Bool(a.Waited),
	)
	if a.Position > 0 {
		span.SetAttributes(keyQueuePosition.Int(a.Position))
	}
	if a.Token != 0 {
		span.SetAttributes(token(a.Token))
	}
	if a.Outcome == lock.OutcomeError {
		o.fail(span, a.Err)
	}
}

func (o *Observer) recordAcquire(ac *acquireCtx, a lock.Acquire) {
	if !o.m.acquireDuration.Enabled(ac) && !o.m.acquireOutcomes.Enabled(ac) {
		return
	}
	attrs := []attribute.KeyValue{
		ac.name,
		operation(a.Try),
		keyAcquireOutcome.String(a.Outcome.String()),
		keyReentrant.Bool(a.Reentrant),
	}
	if a.Outcome == lock.OutcomeError {
		attrs = append(attrs, keyErrorType.String(errorType(a.Err)))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(metricKind(attrs, a.Kind, a.Limit)...))
	o.m.acquireDuration.Record(ac, a.Wait.Seconds(), opt)
	o.m.acquireOutcomes.Add(ac, 1, opt)
}

// fail marks span as failed with err.
func (o *Observer) fail(span trace.Span, err error) {
	span.SetAttributes(keyErrorType.String(errorType(err)))
	span.SetStatus(codes.Error, description(err, o.rawKey))
}
