package otellock_test

import (
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestCloseWhileRedisStalled: Close with holds, a re-entry and a waiter
// while redis-server is stopped with SIGSTOP returns within 1 s (generous bound 1.5 s), ends every hold span
// with outcome closed and the waiter's acquire span as canceled, no
// failure, and brings the gauges back to 0.
func TestCloseWhileRedisStalled(t *testing.T) {
	srv := redistest.Start(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, srv.Client(t))
	ctx, request := tel.parent("request")
	defer request.End()

	outer, _ := locktest.MustLock(t, locker, ctx, "orders:1")
	locktest.MustLock(t, locker, outer, "orders:1")
	locktest.MustLock(t, locker, ctx, "orders:2")
	errc := make(chan error, 1)
	go func() { _, _, err := locker.Lock(ctx, "orders:2"); errc <- err }()
	waitGauge(t, tel, "lock.waiting", 1)

	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	if err := locker.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("Close took %v with Redis stalled, want within 1 s (bound 1.5 s)", took)
	}
	if err := <-errc; !errors.Is(err, lock.ErrClosed) {
		t.Errorf("Lock waiting at Close: %v, want ErrClosed", err)
	}
	// The waiter's span: canceled, as a caller giving up, not an error: a
	// deploy closes Clients and must not make error spans.
	for _, s := range tel.ended("lock.acquire") {
		if attr(t, s, aAcquireOutcome).AsString() == "acquired" {
			continue
		}
		if o := attr(t, s, aAcquireOutcome).AsString(); o != "canceled" || hasAttr(s, aErrorType) || s.Status().Code == codes.Error {
			t.Errorf("lock.acquire of a waiter ended by Close: outcome %q, status %v, attributes %v; want canceled, no error", o, s.Status(), s.Attributes())
		}
	}

	holds := tel.ended("lock.hold")
	if len(holds) != 3 {
		t.Errorf("%d lock.hold spans ended, want 3", len(holds))
	}
	for _, s := range holds {
		wantHoldEnd(t, s, "closed", "lock.closed", "")
	}
	if started, ended := len(tel.spans.Started()), len(tel.spans.Ended()); started != ended+1 {
		t.Errorf("%d spans started, %d ended", started, ended)
	}
	m := tel.collect(t)
	wantAllZero(t, m, "lock.held")
	wantAllZero(t, m, "lock.waiting")
	if n, sets := m.total(t, "lock.lost"); n != 0 {
		t.Errorf("lock.lost = %d (%v) after Close, want 0", n, sets)
	}
}
