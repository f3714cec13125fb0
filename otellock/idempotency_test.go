package otellock_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lockkit/lockkit/otellock"
)

// spanRecorder is a recording span that keeps what it is given.
type spanRecorder struct {
	noop.Span
	attrs    []attribute.KeyValue
	events   []string
	eventKVs []attribute.KeyValue
	failed   bool // SetStatus(Error) or RecordError called
}

func (s *spanRecorder) IsRecording() bool { return true }

func (s *spanRecorder) SetAttributes(kv ...attribute.KeyValue) { s.attrs = append(s.attrs, kv...) }

func (s *spanRecorder) AddEvent(name string, opts ...trace.EventOption) {
	s.events = append(s.events, name)
	cfg := trace.NewEventConfig(opts...)
	s.eventKVs = append(s.eventKVs, cfg.Attributes()...)
}

func (s *spanRecorder) SetStatus(c codes.Code, _ string) { s.failed = s.failed || c == codes.Error }

func (s *spanRecorder) RecordError(error, ...trace.EventOption) { s.failed = true }

func TestIdempotencyOutcome(t *testing.T) {
	for _, outcome := range []string{"ran", "replayed", "conflict", "mismatch", "unavailable", "store-failed"} {
		span := &spanRecorder{}
		otellock.IdempotencyOutcome(trace.ContextWithSpan(context.Background(), span), outcome)
		want := attribute.String("idempotency.outcome", outcome)
		if len(span.attrs) != 1 || span.attrs[0] != want {
			t.Errorf("%s: attributes %v, want %v", outcome, span.attrs, want)
		}
		if len(span.events) != 1 || span.events[0] != "idempotency" || len(span.eventKVs) != 1 || span.eventKVs[0] != want {
			t.Errorf("%s: events %v %v, want one \"idempotency\" with %v", outcome, span.events, span.eventKVs, want)
		}
		if span.failed {
			t.Errorf("%s: the span was marked as failed", outcome)
		}
	}
	otellock.IdempotencyOutcome(context.Background(), "ran") // no span: nothing to do, no panic
}
