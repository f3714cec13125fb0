package otellock

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// keyIdempotencyOutcome is the attribute of what the Idempotency-Key
// middleware did with a request.
const keyIdempotencyOutcome = attribute.Key("idempotency.outcome")

// IdempotencyOutcome records outcome, what the Idempotency-Key middleware
// of packages httplock and ginlock did with a request, on the span of
// ctx (the request's, started by otelhttp or otelgin): the attribute
// idempotency.outcome and an event "idempotency" carrying it. It never
// sets the span's status nor records an error: a replay, a conflict (409)
// or a mismatch (422) is the middleware doing its work, and the answer's
// HTTP status is on the span already. Nothing is recorded when the span
// does not record. Pass it to httplock.WithOutcome:
//
//	httplock.Idempotent(locker, rdb, httplock.WithOutcome(otellock.IdempotencyOutcome))
func IdempotencyOutcome(ctx context.Context, outcome string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	kv := keyIdempotencyOutcome.String(outcome)
	span.SetAttributes(kv)
	span.AddEvent("idempotency", trace.WithAttributes(kv))
}
