package otellock

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/lock"
)

// Option configures an [Observer]; pass options to [New].
type Option func(*config)

type config struct {
	tp            trace.TracerProvider
	mp            metric.MeterProvider
	name          func(key string) string
	maxNames      int
	rawKey        bool
	internalSpans bool
}

// WithTracerProvider sets the provider of the tracer that records the
// lock.acquire and lock.hold spans. Default: the global provider
// (otel.GetTracerProvider) at the time of [New]; a global set later is
// still used, as the global provider delegates to it.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets the provider of the meter that records the lock
// metrics. Default: the global provider (otel.GetMeterProvider) at the time
// of [New], which delegates to a global set later.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithLockName sets the function that maps the key of a lock that was not
// given a name with [lock.WithName] to the lock.name attribute of spans
// and metrics. It must be safe for concurrent use, fast, and return few
// distinct values: every name is a time series of each metric. An empty
// result is recorded as "_OTHER". Default [DefaultLockName].
//
// To keep one series per key, which is only wise for a small fixed set of
// keys, pass a function returning the key; the cap of [WithMaxLockNames]
// still applies.
func WithLockName(f func(key string) string) Option {
	return func(c *config) { c.name = f }
}

// WithMaxLockNames caps the distinct lock.name values the Observer
// records at n: once n names were seen, locks with a new name are recorded
// as "_OTHER", and the OpenTelemetry error handler (otel.Handle) is told
// once. The cap bounds the series of every metric whatever keys and names
// come along; "_OTHER" does not count against it. The names of the locks
// integrations take for their own bookkeeping ([lock.Integration.Internal], such
// as cronlock's tick markers) have a cap of their own, also n, so they
// never take the places of the application's names. n must be at least 1.
// Default [DefaultMaxLockNames] (100).
func WithMaxLockNames(n int) Option {
	return func(c *config) { c.maxNames = n }
}

// WithInternalSpans records spans also for the locks integrations take
// for their own bookkeeping ([lock.Integration.Internal]), such as the tick
// markers of package cronlock, which otherwise get metrics only and no
// spans, and whose Redis commands start no trace (see [Observer]).
func WithInternalSpans() Option {
	return func(c *config) { c.internalSpans = true }
}

// WithRawKey adds the lock key itself as the lock.key attribute of spans,
// and the full error messages, which name the key, to their status. Keys
// often hold identifiers of users or orders, so this is off by default.
// Metrics never get the raw key; see [WithLockName]. The attribute is
// valid UTF-8 (bytes that are not become U+FFFD) and at most
// [MaxKeyAttrLen] bytes (a longer key is cut, ending in "…"); a key the
// Client rejects (empty, or over [lock.MaxKeyLen]) is not recorded.
func WithRawKey() Option {
	return func(c *config) { c.rawKey = true }
}

func (c *config) validate() error {
	switch {
	case c.tp == nil:
		return invalid("nil TracerProvider")
	case c.mp == nil:
		return invalid("nil MeterProvider")
	case c.name == nil:
		return invalid("nil lock name function")
	case c.maxNames < 1:
		return invalid(fmt.Sprintf("WithMaxLockNames(%d): want at least 1", c.maxNames))
	}
	return nil
}

// invalid returns an error about a bad argument; it wraps [lock.ErrInvalid].
func invalid(problem string) error {
	return fmt.Errorf("otellock: %s: %w", problem, lock.ErrInvalid)
}
