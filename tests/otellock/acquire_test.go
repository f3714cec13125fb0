package otellock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// Attribute keys as docs/observability.md names them.
const (
	aName           = attribute.Key("lock.name")
	aKey            = attribute.Key("lock.key")
	aOperation      = attribute.Key("lock.operation")
	aReentrant      = attribute.Key("lock.reentrant")
	aToken          = attribute.Key("lock.fencing_token")
	aAcquireOutcome = attribute.Key("lock.acquire.outcome")
	aWaitTime       = attribute.Key("lock.acquire.wait_time")
	aHoldOutcome    = attribute.Key("lock.hold.outcome")
	aRenewalOutcome = attribute.Key("lock.renewal.outcome")
	aErrorType      = attribute.Key("error.type")
	aWaited         = attribute.Key("lock.acquire.waited")
	aQueuePosition  = attribute.Key("lock.acquire.queue_position")
	aLossReason     = attribute.Key("lock.lost.reason")
)

func TestAcquiredAndReleased(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)
	ctx, request := tel.parent("POST /orders/:id/pay")

	lctx, unlock := locktest.MustLock(t, locker, ctx, "orders:42")
	token := tokenOf(t, lctx, "orders:42")
	if n := len(tel.ended("lock.hold")); n != 0 {
		t.Fatalf("lock.hold ended before unlock")
	}
	held := tel.collect(t).value(t, "lock.held", aName.String("orders"), aReentrant.Bool(false))
	_, work := tel.tp.Tracer("test").Start(lctx, "pay")
	work.End()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	request.End()

	acq := tel.only(t, "lock.acquire")
	wantAttrs(t, acq, aName.String("orders"), aOperation.String("lock"), aAcquireOutcome.String("acquired"),
		aReentrant.Bool(false), aToken.Int64(token))
	if w := attr(t, acq, aWaitTime).AsFloat64(); w < 0 || w > acq.EndTime().Sub(acq.StartTime()).Seconds()+0.05 {
		t.Errorf("wait time %v s outside the span's %v", w, acq.EndTime().Sub(acq.StartTime()))
	}
	if acq.Status().Code != codes.Unset || hasAttr(acq, aKey) || hasAttr(acq, aErrorType) {
		t.Errorf("acquire span: status %v, attributes %v", acq.Status(), acq.Attributes())
	}
	childOf(t, acq, request.SpanContext())

	hold := tel.only(t, "lock.hold")
	wantAttrs(t, hold, aName.String("orders"), aReentrant.Bool(false), aToken.Int64(token), aHoldOutcome.String("released"))
	if hold.Status().Code != codes.Unset || len(hold.Events()) != 0 {
		t.Errorf("hold span: status %v, events %v", hold.Status(), hold.Events())
	}
	childOf(t, hold, request.SpanContext())
	childOf(t, tel.only(t, "pay"), hold.SpanContext())
	if links := hold.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != acq.SpanContext().SpanID() {
		t.Errorf("hold span links %v, want the acquire span", links)
	}
	if hold.StartTime().Before(acq.EndTime().Add(-time.Millisecond)) {
		t.Errorf("hold started at %v, before the acquisition ended at %v", hold.StartTime(), acq.EndTime())
	}

	m := tel.collect(t)
	acquired := []attribute.KeyValue{aName.String("orders"), aOperation.String("lock"),
		aAcquireOutcome.String("acquired"), aReentrant.Bool(false)}
	p := m.histogram(t, "lock.acquire.duration", acquired...)
	if b := p.Bounds; p.Count != 1 || len(b) != 21 || b[0] != 0.0001 || b[len(b)-1] != 600 {
		t.Errorf("lock.acquire.duration: count %d, bounds %v; want 1 and the documented 100 µs to 600 s", p.Count, b)
	}
	if n := m.value(t, "lock.acquire.outcomes", acquired...); n != 1 {
		t.Errorf("lock.acquire.outcomes = %d, want 1", n)
	}
	released := []attribute.KeyValue{aName.String("orders"), aReentrant.Bool(false), aHoldOutcome.String("released")}
	if p := m.histogram(t, "lock.hold.duration", released...); p.Count != 1 || p.Sum > hold.EndTime().Sub(hold.StartTime()).Seconds()+0.01 {
		t.Errorf("lock.hold.duration: count %d, sum %v s; span lasted %v", p.Count, p.Sum, hold.EndTime().Sub(hold.StartTime()))
	}
	if after := m.value(t, "lock.held", aName.String("orders"), aReentrant.Bool(false)); held != 1 || after != 0 {
		t.Errorf("lock.held = %d while held, %d after unlock; want 1, 0", held, after)
	}
}

func TestReentered(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)

	outer, unlockOuter := locktest.MustLock(t, locker, context.Background(), "orders:42")
	_, unlockInner := locktest.MustLock(t, locker, outer, "orders:42")
	token := tokenOf(t, outer, "orders:42")
	reentrant := []attribute.KeyValue{aName.String("orders"), aReentrant.Bool(true)}
	if n := tel.collect(t).value(t, "lock.held", reentrant...); n != 1 {
		t.Errorf("lock.held{reentrant} = %d while re-entered, want 1", n)
	}
	if err := unlockInner(); err != nil {
		t.Fatal(err)
	}
	if err := unlockOuter(); err != nil {
		t.Fatal(err)
	}

	acquires := tel.ended("lock.acquire")
	holds := tel.ended("lock.hold") // inner ends first
	if len(acquires) != 2 || len(holds) != 2 {
		t.Fatalf("%d acquire and %d hold spans, want 2 and 2", len(acquires), len(holds))
	}
	wantAttrs(t, acquires[1], aReentrant.Bool(true), aAcquireOutcome.String("acquired"), aToken.Int64(token))
	wantAttrs(t, holds[0], aReentrant.Bool(true), aToken.Int64(token), aHoldOutcome.String("released"))
	wantAttrs(t, holds[1], aReentrant.Bool(false))
	// The re-entry happens inside the outer hold: its spans are children of it.
	childOf(t, acquires[1], holds[1].SpanContext())
	childOf(t, holds[0], holds[1].SpanContext())
	if holds[1].Parent().IsValid() {
		t.Errorf("outer hold of a context without span has parent %v", holds[1].Parent())
	}

	m := tel.collect(t)
	m.histogram(t, "lock.acquire.duration", aName.String("orders"), aOperation.String("lock"),
		aAcquireOutcome.String("acquired"), aReentrant.Bool(true))
	m.histogram(t, "lock.hold.duration", append(reentrant, aHoldOutcome.String("released"))...)
	if n := m.value(t, "lock.held", reentrant...); n != 0 {
		t.Errorf("lock.held{reentrant} = %d after unlock, want 0", n)
	}
}

// notObtained checks the acquire span and metrics of a call that did not
// get the lock for want, an outcome that is not an error.
func notObtained(t *testing.T, tel *telemetry, op, want string, minWait time.Duration) {
	t.Helper()
	acq := tel.ended("lock.acquire")
	if len(acq) == 0 {
		t.Fatal("no lock.acquire span")
	}
	s := acq[len(acq)-1]
	wantAttrs(t, s, aOperation.String(op), aAcquireOutcome.String(want), aReentrant.Bool(false))
	if s.Status().Code != codes.Unset || hasAttr(s, aErrorType) || hasAttr(s, aToken) {
		t.Errorf("%s: status %v, attributes %v; want no error and no token", want, s.Status(), s.Attributes())
	}
	if w := attr(t, s, aWaitTime).AsFloat64(); w < minWait.Seconds() {
		t.Errorf("%s: wait time %v s, want at least %v", want, w, minWait)
	}
	attrs := []attribute.KeyValue{aName.String("orders"), aOperation.String(op),
		aAcquireOutcome.String(want), aReentrant.Bool(false)}
	m := tel.collect(t)
	if p := m.histogram(t, "lock.acquire.duration", attrs...); p.Count != 1 || p.Sum < minWait.Seconds() {
		t.Errorf("%s: lock.acquire.duration count %d, sum %v s", want, p.Count, p.Sum)
	}
	if n := m.value(t, "lock.acquire.outcomes", attrs...); n != 1 {
		t.Errorf("%s: lock.acquire.outcomes = %d, want 1", want, n)
	}
	if n := len(tel.ended("lock.hold")); n != 0 {
		t.Errorf("%s: %d lock.hold spans", want, n)
	}
}

func TestNotObtained(t *testing.T) {
	tests := []struct {
		name    string
		op      string
		outcome string
		minWait time.Duration
		call    func(locker lock.Locker) error
	}{
		{"contended TryLock", "try_lock", "busy", 0, func(locker lock.Locker) error {
			_, _, err := locker.TryLock(context.Background(), "orders:42")
			return err
		}},
		{"wait timeout", "lock", "timeout", 30 * time.Millisecond, func(locker lock.Locker) error {
			_, _, err := locker.Lock(context.Background(), "orders:42", lock.WithMaxWait(30*time.Millisecond))
			return err
		}},
		{"context cancelled", "lock", "canceled", 30 * time.Millisecond, func(locker lock.Locker) error {
			ctx, cancel := context.WithCancel(context.Background())
			defer time.AfterFunc(30*time.Millisecond, cancel).Stop()
			_, _, err := locker.Lock(ctx, "orders:42")
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rdb := newMini(t)
			holder := locktest.NewClient(t, rdb)
			_, unlock := locktest.MustLock(t, holder, context.Background(), "orders:42")
			defer unlock()
			tel := newTelemetry(t)
			if err := tt.call(tel.locker(t, rdb)); !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("err = %v, want ErrNotObtained", err)
			}
			notObtained(t, tel, tt.op, tt.outcome, tt.minWait)
		})
	}
}

func TestAcquireErrors(t *testing.T) {
	redisDown := func(mr *miniredis.Miniredis, _ *lock.Client) { mr.Close() }
	closed := func(_ *miniredis.Miniredis, locker *lock.Client) { _ = locker.Close() }
	tests := []struct {
		name     string
		key      string
		rawKey   bool
		breakIt  func(mr *miniredis.Miniredis, locker *lock.Client)
		errType  string
		inStatus string // part of the status description
	}{
		{"Redis down", "orders:42", false, redisDown, "connection_refused", "connection refused"},
		{"Redis down, raw key", "orders:42", true, redisDown, "connection_refused", `"orders:42"`},
		{"empty key", "", false, nil, "lock.ErrInvalid", "empty key"},
		{"oversized key", strings.Repeat("x", lock.MaxKeyLen+1), false, nil, "lock.ErrInvalid", "longer than"},
		{"closed client", "orders:42", false, closed, "lock.ErrClosed", "closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mr, rdb := newMini(t)
			tel := newTelemetry(t)
			var opts []otellock.Option
			if tt.rawKey {
				opts = append(opts, otellock.WithRawKey())
			}
			locker := tel.locker(t, rdb, opts...)
			if tt.breakIt != nil {
				tt.breakIt(mr, locker)
			}
			if _, _, err := locker.Lock(context.Background(), tt.key); err == nil {
				t.Fatal("Lock succeeded")
			}

			s := tel.only(t, "lock.acquire")
			wantAttrs(t, s, aAcquireOutcome.String("error"), aErrorType.String(tt.errType))
			if s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, tt.inStatus) {
				t.Errorf("status %v, want Error mentioning %q", s.Status(), tt.inStatus)
			}
			if !tt.rawKey && tt.key != "" && strings.Contains(s.Status().Description, tt.key) {
				t.Errorf("status %q names the key without WithRawKey", s.Status().Description)
			}
			tel.collect(t).histogram(t, "lock.acquire.duration", aName.String(otellock.DefaultLockName(tt.key)), aOperation.String("lock"),
				aAcquireOutcome.String("error"), aReentrant.Bool(false), aErrorType.String(tt.errType))
			if len(tel.ended("lock.hold")) != 0 {
				t.Error("a failed acquisition has a lock.hold span")
			}
		})
	}
}

// tokenOf returns the fencing token of the hold on key that ctx carries.
func tokenOf(t *testing.T, ctx context.Context, key string) int64 {
	t.Helper()
	tok, ok := lock.FencingToken(ctx, key)
	if !ok || tok == 0 {
		t.Fatalf("FencingToken = %d, %v; want a token", tok, ok)
	}
	return int64(tok)
}
