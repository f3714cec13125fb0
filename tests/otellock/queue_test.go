package otellock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestQueuePositions: three Lock calls, of
// two Clients, that come one after another while the key is held get
// queue positions 1, 2 and 3 on their lock.acquire spans, and lock.waiting
// counts each Client's own waiters.
func TestQueuePositions(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	a := tel.locker(t, rdb)
	b := tel.locker(t, rdb)
	_, unlock := locktest.MustLock(t, a, context.Background(), "orders:42")

	got := make(chan lock.UnlockFunc, 3)
	for i, l := range []*lock.Client{b, a, b} {
		go func() {
			_, u, err := l.Lock(context.Background(), "orders:42", lock.WithMaxWait(10*time.Second))
			if err != nil {
				t.Error(err)
			}
			got <- u
		}()
		waitGauge(t, tel, "lock.waiting", int64(i+1)) // in the queue before the next one comes
	}
	_ = unlock()
	for range 3 {
		if u := <-got; u != nil {
			_ = u()
		}
	}

	var positions []int64
	for _, s := range tel.ended("lock.acquire") {
		if attr(t, s, aWaited).AsBool() {
			positions = append(positions, attr(t, s, aQueuePosition).AsInt64())
		}
	}
	slices.Sort(positions)
	if !slices.Equal(positions, []int64{1, 2, 3}) {
		t.Errorf("queue positions %v, want [1 2 3]", positions)
	}
	wantAllZero(t, tel.collect(t), "lock.waiting")
}
