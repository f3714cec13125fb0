package otellock

import (
	"context"

	"go.opentelemetry.io/otel/metric"

	"github.com/lockkit/lockkit/lock"
)

// Renewed records a watchdog batch: lock.renewals by outcome and
// lock.renewal.duration. It implements [lock.Observer].
func (o *Observer) Renewed(r lock.Renewal) {
	ctx := context.Background()
	if r.Err != nil {
		errType := keyErrorType.String(errorType(r.Err))
		o.m.renewals.Add(ctx, int64(r.Leases), metric.WithAttributes(keyRenewalOutcome.String(renewalError), errType))
		o.m.renewalDuration.Record(ctx, r.Duration.Seconds(), metric.WithAttributes(errType))
		return
	}
	if n := r.Leases - r.Lost; n > 0 {
		o.m.renewals.Add(ctx, int64(n), metric.WithAttributes(keyRenewalOutcome.String(renewalRenewed)))
	}
	if r.Lost > 0 {
		o.m.renewals.Add(ctx, int64(r.Lost), metric.WithAttributes(keyRenewalOutcome.String(renewalLost)))
	}
	o.m.renewalDuration.Record(ctx, r.Duration.Seconds())
}
