package otellock

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/lock"
)

// holdCtx is the context of one hold level as the caller gets it: the lock
// context with the lock.hold span, and what Released needs. It is made
// only when something records the hold, and found with Value, so that an
// observer wrapping this one may derive contexts from it.
type holdCtx struct {
	context.Context
	span    trace.Span // nil when the lock gets no spans
	name    attribute.KeyValue
	heldOpt metric.AddOption // lock.held's attributes; nil when it was not incremented
	kind    string           // lock.Acquire's Kind and Limit
	limit   int
}

type holdKey struct{}

func (hc *holdCtx) Value(key any) any {
	if key == (holdKey{}) {
		return hc
	}
	return hc.Context.Value(key)
}

// startHold starts the lock.hold span of a level just obtained. Its parent
// is the caller's span, which held carries; link, when not nil, leads to
// the lock.acquire span, which matters most when the hold is the root of
// a trace. name is the lock.name, or invalid when not computed yet.
func (o *Observer) startHold(held context.Context, a lock.Acquire, name attribute.KeyValue, link *trace.Link) context.Context {
	ctx := held
	var span trace.Span
	if o.traced(a) {
		var opts []trace.SpanStartOption
		if link != nil {
			opts = append(opts, trace.WithLinks(*link))
		}
		ctx, span = o.tracer.Start(held, "lock.hold", opts...)
	} else {
		ctx = o.untraced(held) // its unlock starts no trace either
	}
	recording, counting := span != nil && span.IsRecording(), o.m.held.Enabled(ctx)
	if !recording && !counting && !o.m.holdDuration.Enabled(ctx) && !o.m.lost.Enabled(ctx) {
		// A span that does not record needs no End. The lock context of a
		// re-entry derives from the outer level's: hide that level's state
		// from Released.
		if ctx.Value(holdKey{}) != nil {
			return context.WithValue(ctx, holdKey{}, (*holdCtx)(nil))
		}
		return ctx
	}
	if !name.Valid() {
		name = o.lockName(a)
	}
	if recording {
		span.SetAttributes(o.spanAttrs(name, a)...)
		if a.Token != 0 {
			span.SetAttributes(token(a.Token))
		}
	}
	hc := &holdCtx{Context: ctx, span: span, name: name, kind: a.Kind, limit: a.Limit}
	if counting {
		hc.heldOpt = metric.WithAttributeSet(kindSet(a.Kind, a.Limit, name, keyReentrant.Bool(a.Reentrant)))
		o.m.held.Add(ctx, 1, hc.heldOpt)
	}
	return hc
}

// Released ends the lock.hold span of the level whose context is ctx and
// records its metrics. A loss adds the event lock.lost, with the reason,
// and marks the span as failed, as does a failed unlock; Close adds the
// event lock.closed and is no failure. It implements [lock.Observer].
func (o *Observer) Released(ctx context.Context, r lock.Release) {
	hc, _ := ctx.Value(holdKey{}).(*holdCtx)
	if hc == nil {
		return // nothing recorded this level
	}
	outcome := holdOutcome(r.Cause)
	if hc.span != nil {
		o.endHoldSpan(hc.span, outcome, r)
	}
	if hc.heldOpt != nil {
		o.m.held.Add(hc, -1, hc.heldOpt)
	}
	lost := outcome == holdLost && o.m.lost.Enabled(hc)
	if !lost && !o.m.holdDuration.Enabled(hc) {
		return
	}
	reentrant := keyReentrant.Bool(r.Reentrant)
	attrs := []attribute.KeyValue{hc.name, reentrant, keyHoldOutcome.String(outcome)}
	if outcome == holdError {
		attrs = append(attrs, keyErrorType.String(errorType(r.Cause)))
	}
	o.m.holdDuration.Record(hc, r.Held.Seconds(), metric.WithAttributeSet(attribute.NewSet(metricKind(attrs, hc.kind, hc.limit)...)))
	if lost {
		o.m.lost.Add(hc, 1, metric.WithAttributeSet(kindSet(hc.kind, hc.limit, hc.name, reentrant, keyLossReason.String(r.Loss.String()))))
	}
}

func (o *Observer) endHoldSpan(span trace.Span, outcome string, r lock.Release) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(keyHoldOutcome.String(outcome))
	switch outcome {
	case holdLost:
		reason := keyLossReason.String(r.Loss.String())
		span.SetAttributes(reason)
		span.AddEvent("lock.lost", trace.WithAttributes(reason))
		o.fail(span, r.Cause)
	case holdClosed:
		span.AddEvent("lock.closed") // the application closes the Client: no failure
	case holdError:
		o.fail(span, r.Cause)
	}
}
