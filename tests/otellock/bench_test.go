package otellock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// BenchmarkObserver is the Observer's own cost for one Lock and its
// unlock: the three calls the Client makes, without Redis.
func BenchmarkObserver(b *testing.B) {
	for _, bc := range observerCases() {
		b.Run(bc.name, func(b *testing.B) {
			obs, err := otellock.New(bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			held, cancel := context.WithCancel(ctx)
			defer cancel()
			start := lock.Acquire{Key: "orders:42"}
			end := lock.Acquire{Key: "orders:42", Outcome: lock.OutcomeAcquired, Wait: time.Millisecond, Token: 7}
			rel := lock.Release{Key: "orders:42", Held: 10 * time.Millisecond}
			b.ReportAllocs()
			for b.Loop() {
				hctx := obs.AcquireEnded(obs.AcquireStarted(ctx, start), end, held)
				obs.Released(hctx, rel)
			}
		})
	}
}

// BenchmarkLockUnlock is one uncontended Lock and unlock against a real
// redis-server on loopback (two round trips), without and with the
// Observer. Redis runs in its own process, so allocs/op are the client's.
func BenchmarkLockUnlock(b *testing.B) {
	rdb := redistest.Start(b).Client(b)
	run := func(b *testing.B, opts ...lock.Option) {
		locker := locktest.NewClient(b, rdb, opts...)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			_, unlock, err := locker.Lock(ctx, "orders:42")
			if err != nil {
				b.Fatal(err)
			}
			if err := unlock(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("no-observer", func(b *testing.B) { run(b) })
	for _, bc := range observerCases() {
		b.Run(bc.name, func(b *testing.B) {
			obs, err := otellock.New(bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			run(b, lock.WithObserver(obs))
		})
	}
}
