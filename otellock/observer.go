package otellock

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/lock"
)

// Observer records spans and metrics of a [lock.Client]. It implements
// [lock.Observer]; attach it with [lock.WithObserver]. It is safe for
// concurrent use, and one Observer may serve several Clients.
type Observer struct {
	tracer trace.Tracer
	m      instruments
	name   func(key string) string
	rawKey bool
}

var _ lock.Observer = (*Observer)(nil)

// New returns an Observer. Defaults: the global TracerProvider and
// MeterProvider, lock names from [DefaultLockName], no raw keys.
//
// It returns an error wrapping [lock.ErrInvalid] for a nil provider or
// name function, or the meter's error if it rejects an instrument.
func New(opts ...Option) (*Observer, error) {
	cfg := config{
		tp:   otel.GetTracerProvider(),
		mp:   otel.GetMeterProvider(),
		name: DefaultLockName,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ins, err := newInstruments(cfg.mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version())))
	if err != nil {
		return nil, err
	}
	return &Observer{
		tracer: cfg.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version())),
		m:      ins,
		name:   cfg.name,
		rawKey: cfg.rawKey,
	}, nil
}

// lockName returns the lock.name attribute of key.
func (o *Observer) lockName(key string) attribute.KeyValue {
	name := o.name(key)
	if name == "" {
		name = otherName
	}
	return keyName.String(name)
}

// spanAttrs returns the attributes that both spans of an acquisition
// start with.
func (o *Observer) spanAttrs(name attribute.KeyValue, a lock.Acquire) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, name, keyReentrant.Bool(a.Reentrant))
	if o.rawKey {
		attrs = append(attrs, keyKey.String(a.Key))
	}
	return attrs
}
