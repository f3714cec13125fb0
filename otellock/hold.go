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
// only when something records the hold.
type holdCtx struct {
	context.Context
	span    trace.Span
	name    attribute.KeyValue
	heldOpt metric.AddOption // lock.held's attributes; nil when it was not incremented
}

// startHold starts the lock.hold span of a level just obtained. Its parent
// is the caller's span, which held carries; link, when not nil, leads to
// the lock.acquire span, which matters most when the hold is the root of
// a trace. name is the lock.name, or invalid when not computed yet.
func (o *Observer) startHold(held context.Context, a lock.Acquire, name attribute.KeyValue, link *trace.Link) context.Context {
	var opts []trace.SpanStartOption
	if link != nil {
		opts = append(opts, trace.WithLinks(*link))
	}
	ctx, span := o.tracer.Start(held, "lock.hold", opts...)
	recording, counting := span.IsRecording(), o.m.held.Enabled(ctx)
	if !recording && !counting && !o.m.holdDuration.Enabled(ctx) && !o.m.lost.Enabled(ctx) {
		return ctx // a span that does not record needs no End
	}
	if !name.Valid() {
		name = o.lockName(a.Key)
	}
	if recording {
		span.SetAttributes(o.spanAttrs(name, a)...)
		if a.Token != 0 {
			span.SetAttributes(token(a.Token))
		}
	}
	hc := &holdCtx{Context: ctx, span: span, name: name}
	if counting {
		hc.heldOpt = metric.WithAttributeSet(attribute.NewSet(name, keyReentrant.Bool(a.Reentrant)))
		o.m.held.Add(ctx, 1, hc.heldOpt)
	}
	return hc
}

// Released ends the lock.hold span of the level whose context is ctx and
// records its metrics. A loss or Close adds the event lock.lost or
// lock.closed and marks the span as failed, as does a failed unlock. It
// implements [lock.Observer].
func (o *Observer) Released(ctx context.Context, r lock.Release) {
	// Not ctx.Value: a context derived from another level's would find
	// that level's state.
	hc, ok := ctx.(*holdCtx)
	if !ok {
		return // nothing recorded this level
	}
	outcome := holdOutcome(r.Cause)
	o.endHoldSpan(hc.span, outcome, r.Cause)
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
	o.m.holdDuration.Record(hc, r.Held.Seconds(), metric.WithAttributeSet(attribute.NewSet(attrs...)))
	if lost {
		o.m.lost.Add(hc, 1, metric.WithAttributeSet(attribute.NewSet(hc.name, reentrant)))
	}
}

func (o *Observer) endHoldSpan(span trace.Span, outcome string, cause error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(keyHoldOutcome.String(outcome))
	switch outcome {
	case holdLost, holdClosed:
		span.AddEvent("lock." + outcome)
	}
	if cause != nil {
		o.fail(span, cause)
	}
}
