package otellock_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"

	"github.com/lockkit/lockkit/internal/redistest"
)

func TestMain(m *testing.M) {
	redistest.QuietLogs()
	goleak.VerifyTestMain(m)
}

// telemetry is an SDK TracerProvider and MeterProvider that keep
// everything in memory for the test.
type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(t testing.TB) *telemetry {
	t.Helper()
	tel := &telemetry{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	t.Cleanup(func() {
		_ = tel.tp.Shutdown(context.Background())
		_ = tel.mp.Shutdown(context.Background())
	})
	return tel
}

// observer returns an Observer recording to tel.
func (tel *telemetry) observer(t testing.TB, opts ...otellock.Option) *otellock.Observer {
	t.Helper()
	opts = append([]otellock.Option{otellock.WithTracerProvider(tel.tp), otellock.WithMeterProvider(tel.mp)}, opts...)
	obs, err := otellock.New(opts...)
	if err != nil {
		t.Fatalf("otellock.New: %v", err)
	}
	return obs
}

// locker returns a lock Client on rdb observed by tel, closed when the test
// ends.
func (tel *telemetry) locker(t testing.TB, rdb redis.UniversalClient, opts ...otellock.Option) *lock.Client {
	t.Helper()
	return locktest.NewClient(t, rdb, lock.WithObserver(tel.observer(t, opts...)))
}

// parent starts a span the test's locks run under.
func (tel *telemetry) parent(name string) (context.Context, trace.Span) {
	return tel.tp.Tracer("test").Start(context.Background(), name)
}

// ended returns the ended spans called name, in the order they ended.
func (tel *telemetry) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// only returns the one ended span called name.
func (tel *telemetry) only(t testing.TB, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := tel.ended(name)
	if len(spans) != 1 {
		t.Fatalf("%d ended %s spans, want 1", len(spans), name)
	}
	return spans[0]
}

// collect reads the metrics recorded so far.
func (tel *telemetry) collect(t testing.TB) metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	m := metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			m[md.Name] = md
		}
	}
	return m
}

// metrics are the collected metrics by name.
type metrics map[string]metricdata.Metrics

// value returns the value of the counter or up-down counter name at the
// data point whose attributes are exactly attrs; 0 when there is none.
func (m metrics) value(t testing.TB, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	md, ok := m[name]
	if !ok {
		return 0
	}
	sum, ok := md.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", name, md.Data)
	}
	want := attribute.NewSet(attrs...)
	for _, p := range sum.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Value
		}
	}
	return 0
}

// total returns the sum of counter name over the data points whose
// attributes include attrs, and the attribute sets of those points.
func (m metrics) total(t testing.TB, name string, attrs ...attribute.KeyValue) (int64, []attribute.Set) {
	t.Helper()
	md, ok := m[name]
	if !ok {
		return 0, nil
	}
	sum, ok := md.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", name, md.Data)
	}
	var n int64
	var sets []attribute.Set
	for _, p := range sum.DataPoints {
		match := true
		for _, kv := range attrs {
			v, ok := p.Attributes.Value(kv.Key)
			match = match && ok && v == kv.Value
		}
		if match {
			n += p.Value
			sets = append(sets, p.Attributes)
		}
	}
	return n, sets
}

// histogram returns the data point of histogram name whose attributes are
// exactly attrs, failing the test when there is none.
func (m metrics) histogram(t testing.TB, name string, attrs ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	md, ok := m[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	h, ok := md.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a float64 histogram", name, md.Data)
	}
	want := attribute.NewSet(attrs...)
	var sets []string
	for _, p := range h.DataPoints {
		if p.Attributes.Equals(&want) {
			return p
		}
		sets = append(sets, p.Attributes.Encoded(attribute.DefaultEncoder()))
	}
	t.Fatalf("%s has no point with attributes %s; it has %q", name, want.Encoded(attribute.DefaultEncoder()), sets)
	return metricdata.HistogramDataPoint[float64]{}
}

// pointSets returns the attribute sets of md's data points.
func pointSets(md metricdata.Metrics) []attribute.Set {
	var sets []attribute.Set
	switch d := md.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	return sets
}

// newMini returns a miniredis server and a client of it that does not
// retry, both closed when the test ends.
func newMini(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	return mr, rdb
}

// attr returns the attribute key of span s, failing the test when s does
// not have it.
func attr(t testing.TB, s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	t.Helper()
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	t.Fatalf("span %s has no attribute %s: %v", s.Name(), key, s.Attributes())
	return attribute.Value{}
}

// hasAttr reports whether span s has the attribute key.
func hasAttr(s sdktrace.ReadOnlySpan, key attribute.Key) bool {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return true
		}
	}
	return false
}

// wantAttrs fails the test unless span s has each of want's attributes
// with its value.
func wantAttrs(t testing.TB, s sdktrace.ReadOnlySpan, want ...attribute.KeyValue) {
	t.Helper()
	for _, kv := range want {
		if got := attr(t, s, kv.Key); got != kv.Value {
			t.Errorf("span %s: %s = %s, want %s", s.Name(), kv.Key, got.Emit(), kv.Value.Emit())
		}
	}
}

// childOf fails the test unless span s is a child of parent.
func childOf(t testing.TB, s sdktrace.ReadOnlySpan, parent trace.SpanContext) {
	t.Helper()
	if got := s.Parent(); got.SpanID() != parent.SpanID() || got.TraceID() != parent.TraceID() {
		t.Errorf("span %s: parent %s/%s, want %s/%s", s.Name(), got.TraceID(), got.SpanID(), parent.TraceID(), parent.SpanID())
	}
}

// done waits up to limit for ctx to end.
func done(t testing.TB, ctx context.Context, limit time.Duration, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(limit):
		t.Fatalf("%s: not within %v", what, limit)
	}
}

// providers is a choice of providers to run an Observer with.
type providers struct {
	name string
	opts []otellock.Option
}

// observerCases are the providers that tests and benchmarks run an
// Observer with: tracing off, not set up, and on.
func observerCases() []providers {
	return []providers{
		{"noop", []otellock.Option{
			otellock.WithTracerProvider(tracenoop.NewTracerProvider()),
			otellock.WithMeterProvider(metricnoop.NewMeterProvider()),
		}},
		{"globals-unset", nil}, // the global providers before an SDK is installed
		{"sdk", []otellock.Option{ // recording everything, exporting nothing
			otellock.WithTracerProvider(sdktrace.NewTracerProvider()),
			otellock.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))),
		}},
	}
}
