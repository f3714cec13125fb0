package otellock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestLossReasons: against a real
// redis-server, lock.lost.reason tells a deleted key, a key taken over by
// another owner and a Redis restarted empty (key_gone) from a Redis gone
// down for good (not_renewed), on the span and on lock.lost.
func TestLossReasons(t *testing.T) {
	tests := []struct {
		name   string
		lease  time.Duration
		breaks func(t *testing.T, srv *redistest.Server)
		reason string
	}{
		{"key deleted", 2 * time.Second, func(t *testing.T, srv *redistest.Server) {
			if err := srv.Client(t).FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		}, "key_gone"},
		{"key taken over", 2 * time.Second, func(t *testing.T, srv *redistest.Server) {
			rdb := srv.Client(t)
			if err := rdb.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			other := locktest.NewClient(t, rdb)
			locktest.MustLock(t, other, context.Background(), "orders:42")
		}, "key_gone"},
		{"Redis restarted empty", 2 * time.Second, func(_ *testing.T, srv *redistest.Server) { srv.Restart() }, "key_gone"},
		{"Redis down", 300 * time.Millisecond, func(_ *testing.T, srv *redistest.Server) { srv.Stop() }, "not_renewed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			tel := newTelemetry(t)
			locker := tel.locker(t, srv.Client(t))
			lctx, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42", lock.WithLease(tt.lease))
			tt.breaks(t, srv)
			done(t, lctx, 10*time.Second, "loss")
			if err := unlock(); !errors.Is(err, lock.ErrLost) {
				t.Errorf("unlock after loss: %v, want ErrLost", err)
			}
			s := tel.only(t, "lock.hold")
			wantAttrs(t, s, aHoldOutcome.String("lost"), aLossReason.String(tt.reason))
			if n := tel.collect(t).value(t, "lock.lost", aName.String("orders"), aReentrant.Bool(false), aLossReason.String(tt.reason)); n != 1 {
				t.Errorf("lock.lost{reason=%s} = %d, want 1", tt.reason, n)
			}
		})
	}
}
