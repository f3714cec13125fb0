package otellock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  otellock.Option
		want string
	}{
		{"nil tracer provider", otellock.WithTracerProvider(nil), "nil TracerProvider"},
		{"nil meter provider", otellock.WithMeterProvider(nil), "nil MeterProvider"},
		{"nil name function", otellock.WithLockName(nil), "nil lock name function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs, err := otellock.New(tt.opt)
			if obs != nil || !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, %v; want an ErrInvalid naming %q", obs, err, tt.want)
			}
		})
	}
}

func TestNewDefaultsToGlobals(t *testing.T) {
	obs, err := otellock.New()
	if err != nil || obs == nil {
		t.Fatalf("New() = %v, %v", obs, err)
	}
}

func TestWithLockName(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	tenantless := func(key string) string { // "tenants:acme:reports" → "reports"
		if rest, ok := strings.CutPrefix(key, "tenants:"); ok {
			_, key, _ = strings.Cut(rest, ":")
		}
		return key
	}
	locker := tel.locker(t, rdb, otellock.WithLockName(tenantless))
	_, unlock := locktest.MustLock(t, locker, context.Background(), "tenants:acme:reports")
	_ = unlock()
	_, unlock = locktest.MustLock(t, locker, context.Background(), "tenants:acme:")
	_ = unlock()

	wantAttrs(t, tel.ended("lock.hold")[0], aName.String("reports"))
	wantAttrs(t, tel.ended("lock.hold")[1], aName.String("_OTHER")) // the function returned ""
	m := tel.collect(t)
	for _, name := range []string{"reports", "_OTHER"} {
		m.histogram(t, "lock.hold.duration", aName.String(name), aReentrant.Bool(false), aHoldOutcome.String("released"))
	}
}

func TestWithRawKey(t *testing.T) {
	for _, raw := range []bool{false, true} {
		_, rdb := newMini(t)
		tel := newTelemetry(t)
		var opts []otellock.Option
		if raw {
			opts = append(opts, otellock.WithRawKey())
		}
		locker := tel.locker(t, rdb, opts...)
		_, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42")
		_ = unlock()

		for _, s := range tel.spans.Ended() {
			if hasAttr(s, aKey) != raw {
				t.Errorf("raw=%v: span %s attributes %v", raw, s.Name(), s.Attributes())
			}
			if raw {
				wantAttrs(t, s, aKey.String("orders:42"))
			}
		}
		for name, md := range tel.collect(t) {
			for _, set := range pointSets(md) {
				if set.HasValue(aKey) {
					t.Errorf("raw=%v: metric %s has lock.key", raw, name)
				}
			}
		}
	}
}
