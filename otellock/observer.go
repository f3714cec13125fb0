package otellock

import (
	"context"
	"crypto/rand"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/lock"
)

// Observer records spans and metrics of a [lock.Client]. It implements
// [lock.Observer]; attach it with [lock.WithObserver]. It is safe for
// concurrent use, and one Observer may serve several Clients.
//
// An observer that wraps an Observer (to add a value to the contexts it
// returns, say) may return contexts derived from those the Observer
// returned: the Observer finds its state in them with Value.
type Observer struct {
	tracer        trace.Tracer
	m             instruments
	name          func(key string) string
	names         *names
	rawKey        bool
	internalSpans bool
	quiet         trace.SpanContext // the parent of work that starts no trace
}

var _ lock.Observer = (*Observer)(nil)

// New returns an Observer. Defaults: the global TracerProvider and
// MeterProvider, lock names from [lock.WithName] or else
// [DefaultLockName], at most [DefaultMaxLockNames] distinct names, no raw
// keys, no spans of internal locks. The tracer and meter have the scope
// [ScopeName], version [Version] and the schema URL of the semantic
// conventions whose names they use.
//
// It returns an error wrapping [lock.ErrInvalid] for a nil provider or
// name function or a cap below 1, or the meter's error if it rejects an
// instrument.
func New(opts ...Option) (*Observer, error) {
	cfg := config{
		tp:       otel.GetTracerProvider(),
		mp:       otel.GetMeterProvider(),
		name:     DefaultLockName,
		maxNames: DefaultMaxLockNames,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ins, err := newInstruments(cfg.mp.Meter(ScopeName,
		metric.WithInstrumentationVersion(Version()), metric.WithSchemaURL(semconv.SchemaURL)))
	if err != nil {
		return nil, err
	}
	return &Observer{
		tracer: cfg.tp.Tracer(ScopeName,
			trace.WithInstrumentationVersion(Version()), trace.WithSchemaURL(semconv.SchemaURL)),
		m:             ins,
		name:          cfg.name,
		names:         &names{max: cfg.maxNames},
		rawKey:        cfg.rawKey,
		internalSpans: cfg.internalSpans,
		quiet:         unsampled(),
	}, nil
}

// unsampled returns a span context that is valid but not sampled: spans
// started under it by a parent-based sampler (the SDK's default) do not
// record.
func unsampled() trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	tid[0] |= 1 // never all zero, which is invalid
	sid[0] |= 1
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
}

// Background returns ctx marked so that the Client's own Redis commands
// (the watchdog's renewals, cleanups, pub/sub) start no trace in a
// tracing Redis client, such as one instrumented by go-redis's
// OpenTelemetry hooks: their spans get an unsampled parent, which a
// parent-based sampler (the SDK's default) does not record; a sampler
// that ignores the parent, such as the SDK's AlwaysSample alone, records
// them in one trace per Observer under a parent span that never exists,
// so use a parent-based one. Renewals are recorded as metrics instead. It
// implements [lock.Observer].
func (o *Observer) Background(ctx context.Context) context.Context {
	return o.untraced(ctx)
}

// untraced returns ctx with the unsampled parent, unless ctx carries a
// span already: then the work is part of that span's trace.
func (o *Observer) untraced(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, o.quiet)
}

// lockName returns the lock.name attribute of a: its name, or the one the
// name function derives from its key, within the cap of distinct names
// (internal locks have a cap of their own).
func (o *Observer) lockName(a lock.Acquire) attribute.KeyValue {
	name := a.Name
	if name == "" {
		name = o.name(a.Key)
	}
	if name == "" || name == otherName {
		return keyName.String(otherName)
	}
	return o.names.attr(name, a.Internal)
}

// traced reports whether a gets spans.
func (o *Observer) traced(a lock.Acquire) bool {
	return !a.Internal || o.internalSpans
}

// spanAttrs returns the attributes that both spans of an acquisition
// start with: its name, re-entry and kind, and the key with WithRawKey.
func (o *Observer) spanAttrs(name attribute.KeyValue, a lock.Acquire) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = spanKind(append(attrs, name, keyReentrant.Bool(a.Reentrant)), a.Kind, a.Limit)
	if o.rawKey && a.Key != "" && len(a.Key) <= lock.MaxKeyLen { // not a key the Client rejects
		attrs = append(attrs, keyAttr(a.Key))
	}
	return attrs
}
