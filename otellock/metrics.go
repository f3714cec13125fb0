package otellock

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// durationBuckets are the histogram bucket boundaries, in seconds: from a
// Redis round trip on a local network (100 µs) to a long job's hold
// (10 min), about 2.5× apart.
var durationBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

// instruments are the Observer's metrics; docs/observability.md describes
// each one.
type instruments struct {
	acquireDuration metric.Float64Histogram
	acquireOutcomes metric.Int64Counter
	holdDuration    metric.Float64Histogram
	held            metric.Int64UpDownCounter
	waiting         metric.Int64UpDownCounter
	lost            metric.Int64Counter
	renewals        metric.Int64Counter
	renewalDuration metric.Float64Histogram
	lapsed          metric.Int64Counter
}

func newInstruments(m metric.Meter) (instruments, error) {
	var ins instruments
	var errs [9]error
	ins.acquireDuration, errs[0] = m.Float64Histogram("lock.acquire.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time from the call of Lock or TryLock to its return, whatever the outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	ins.acquireOutcomes, errs[1] = m.Int64Counter("lock.acquire.outcomes",
		metric.WithUnit("{acquisition}"),
		metric.WithDescription("Calls of Lock and TryLock, by outcome."))
	ins.holdDuration, errs[2] = m.Float64Histogram("lock.hold.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time a hold level lasted, from acquisition to unlock, loss or Close."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	ins.held, errs[3] = m.Int64UpDownCounter("lock.held",
		metric.WithUnit("{lock}"),
		metric.WithDescription("Hold levels this process has now; re-entries count separately."))
	ins.lost, errs[4] = m.Int64Counter("lock.lost",
		metric.WithUnit("{lock}"),
		metric.WithDescription("Hold levels whose lease was lost."))
	ins.renewals, errs[5] = m.Int64Counter("lock.renewals",
		metric.WithUnit("{lease}"),
		metric.WithDescription("Lease renewals by the watchdog, by outcome."))
	ins.renewalDuration, errs[6] = m.Float64Histogram("lock.renewal.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time one watchdog batch of lease renewals took."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	ins.waiting, errs[7] = m.Int64UpDownCounter("lock.waiting",
		metric.WithUnit("{waiter}"),
		metric.WithDescription("Lock calls of this process waiting their turn for a held key now."))
	ins.lapsed, errs[8] = m.Int64Counter("lock.claim.lapsed",
		metric.WithUnit("{lapse}"),
		metric.WithDescription("Times a waiting Lock call of this process lost its place in the queue: a hand-off or turn given to it lapsed unclaimed for a claim window (a pub/sub connection delivering late, or a pause longer than the window)."))
	return ins, errors.Join(errs[:]...)
}
