package otellock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestBackgroundWorkStartsNoTraceAfterRestart (review of issue 18, item
// 2; docs/observability.md "What makes no trace": pub/sub is the Client's
// own work and starts no trace): with a tracing Redis client, a Redis
// restart while a Lock waits (pub/sub reconnects, the hold is lost, the
// waiter gets the key) and a Close with a lock held start no trace of
// their own: every span is in the request's trace.
//
// It fails: go-redis's PubSub channel goroutine receives, and so
// reconnects, under context.TODO, not under the context the Client
// subscribed with; the new connection's HELLO and its CLIENT SETINFO
// pipeline become root traces (stack: initAllChan -> Receive ->
// PubSub.conn -> initConn). (Dials are not traced here: go-redis 9.22
// dials every pool connection under context.Background, whoever asked.)
func TestBackgroundWorkStartsNoTraceAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	tel := newTelemetry(t)
	traceRedis(tel, rdb)
	locker := tel.locker(t, rdb)
	ctx, request := tel.parent("request")

	lctx, unlock := locktest.MustLock(t, locker, ctx, "orders:42", lock.WithLease(300*time.Millisecond))
	got := make(chan error, 1)
	go func() {
		_, u, err := locker.Lock(ctx, "orders:42", lock.WithMaxWait(10*time.Second))
		if err == nil {
			_ = u()
		}
		got <- err
	}()
	waitGauge(t, tel, "lock.waiting", 1)
	srv.Restart() // the key is gone, every connection broken
	done(t, lctx, 5*time.Second, "loss of the hold after the restart")
	_ = unlock()
	if err := <-got; err != nil {
		t.Fatalf("waiter after the restart: %v", err)
	}
	_, _ = locktest.MustLock(t, locker, ctx, "orders:43")
	if err := locker.Close(); err != nil {
		t.Fatal(err)
	}
	request.End()

	if r := roots(tel); len(r) != 1 {
		t.Errorf("root spans %v, want only the request", spanNames(r))
	}
}

// TestCleanupsStartNoTrace (review of issue 18, item 2): with a tracing
// Redis client, the cleanups after a cancelled wait, a wait limit, a lost
// hold and Close start no trace: every span is in the request's trace.
//
// It fails now and then (2 of 160 runs, four test processes at once):
// the same defect as TestBackgroundWorkStartsNoTraceAfterRestart without
// a restart. The Client creates its PubSub with Subscribe(life) and no
// channel, starts go-redis's channel goroutine (ChannelWithSubscriptions)
// and then subscribes; when that goroutine's Receive(context.TODO) wins
// the race it dials the subscription's connection, whose HELLO and CLIENT
// SETINFO become root traces.
func TestCleanupsStartNoTrace(t *testing.T) {
	mr, rdb := newMini(t)
	tel := newTelemetry(t)
	traceRedis(tel, rdb)
	locker := tel.locker(t, rdb)
	ctx, request := tel.parent("request")
	everyEnd(t, tel, locker, ctx, mr)
	request.End()
	if r := roots(tel); len(r) != 1 {
		t.Errorf("root spans %v, want only the request", spanNames(r))
	}
}
