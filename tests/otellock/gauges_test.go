package otellock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// waitGauge waits up to 5 s for the up-down counter name to sum to want.
func waitGauge(t *testing.T, tel *telemetry, name string, want int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if n, _ := tel.collect(t).total(t, name); n == want {
			return
		}
		if time.Now().After(deadline) {
			n, sets := tel.collect(t).total(t, name)
			t.Fatalf("%s = %d at %v after 5 s, want %d", name, n, sets, want)
		}
	}
}

// wantAllZero fails the test unless every point of the up-down counter
// name is 0: +1 in one attribute set and -1 in another cancel in a sum
// but not on a dashboard.
func wantAllZero(t *testing.T, m metrics, name string) {
	t.Helper()
	md, ok := m[name]
	if !ok {
		return
	}
	for _, p := range md.Data.(metricdata.Sum[int64]).DataPoints {
		if p.Value != 0 {
			t.Errorf("%s{%s} = %d at the end, want 0", name, p.Attributes.Encoded(nil), p.Value)
		}
	}
}

// TestGaugesReturnToZero: whatever way calls and
// holds end (unlock, re-entry, TryLock busy, wait limit, cancelled wait,
// hand-off, key deleted, Close with a holder and a waiter), lock.held and
// lock.waiting come back to 0 in every attribute set and every span that
// started has ended, with a plain and with a decorated Observer.
func TestGaugesReturnToZero(t *testing.T) {
	for _, decorated := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "decorated"}[decorated], func(t *testing.T) {
			mr, rdb := newMini(t)
			tel := newTelemetry(t)
			var obs lock.Observer = tel.observer(t)
			if decorated {
				obs = decorator{obs}
			}
			locker := locktest.NewClient(t, rdb, lock.WithObserver(obs))
			ctx, request := tel.parent("request")
			defer request.End()
			everyEnd(t, tel, locker, ctx, mr)

			m := tel.collect(t)
			wantAllZero(t, m, "lock.held")
			wantAllZero(t, m, "lock.waiting")
			if started, ended := len(tel.spans.Started()), len(tel.spans.Ended()); started != ended+1 { // +1: the request
				t.Errorf("%d spans started, %d ended: %d never end", started, ended, started-ended-1)
			}
			n, _ := m.total(t, "lock.lost", aLossReason.String("key_gone"))
			if n != 1 {
				_, sets := m.total(t, "lock.lost")
				t.Errorf("lock.lost{key_gone} = %d, want 1 (points %v)", n, sets)
			}
		})
	}
}

// everyEnd runs calls and holds on locker that end in every way: unlock,
// re-entry, TryLock busy, wait limit, cancelled wait, hand-off, key
// deleted (in every one of mrs), Close with a holder and a waiter. It closes locker.
func everyEnd(t *testing.T, tel *telemetry, locker *lock.Client, ctx context.Context, mrs ...*miniredis.Miniredis) {
	t.Helper()

	// Unlock, re-entry, TryLock busy, wait limit.
	outer, unlock := locktest.MustLock(t, locker, ctx, "orders:1")
	_, unlockInner := locktest.MustLock(t, locker, outer, "orders:1")
	if _, _, err := locker.TryLock(ctx, "orders:1"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock of a held key: %v", err)
	}
	if _, _, err := locker.Lock(ctx, "orders:1", lock.WithMaxWait(50*time.Millisecond)); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Lock past its wait limit: %v", err)
	}

	// A cancelled wait.
	wctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, _, err := locker.Lock(wctx, "orders:1"); errc <- err }()
	waitGauge(t, tel, "lock.waiting", 1)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("cancelled Lock succeeded")
	}

	// A hand-off to a waiter.
	got := make(chan lock.UnlockFunc, 1)
	go func() {
		_, u, err := locker.Lock(ctx, "orders:1", lock.WithMaxWait(5*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	waitGauge(t, tel, "lock.waiting", 1)
	_ = unlockInner()
	_ = unlock()
	if u := <-got; u != nil {
		_ = u()
	}

	// A key deleted under its holder: the watchdog finds it gone at its
	// first renewal, a third of the lease on. (A lease of 2 s gives a
	// quorum node 100 ms to answer, enough beside two busy loops.)
	lctx, unlockLost := locktest.MustLock(t, locker, ctx, "orders:2", lock.WithLease(2*time.Second))
	for _, mr := range mrs {
		mr.FlushAll()
	}
	done(t, lctx, 5*time.Second, "loss of the deleted key")
	_ = unlockLost()

	// Close with a holder and a waiter.
	_, _ = locktest.MustLock(t, locker, ctx, "orders:3")
	go func() { _, _, err := locker.Lock(ctx, "orders:3"); errc <- err }()
	waitGauge(t, tel, "lock.waiting", 1)
	if err := locker.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, lock.ErrClosed) {
		t.Errorf("Lock waiting at Close: %v, want ErrClosed", err)
	}
}
