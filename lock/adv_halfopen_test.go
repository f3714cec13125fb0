package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Adversarial review of 2026-11-28: the half-open pub/sub check (a PING
// after a claim window of silence, every waiter tries once when it is
// unanswered for a quarter window, the connection replaced after 2.25 s)
// against a release that comes after that one try.

// TestHalfOpenSubscriptionKeepsPlaceWhenReleasedAfterRecheck (guarantee
// 6: a waiter whose pub/sub connection went half-open "keeps its place and
// gets the key within two claim windows of the release"): as in
// TestHalfOpenSubscriptionKeepsWaiterPlace, but the key is released 1.4 s
// after the cut, once the health check's PING went unanswered for a
// quarter window and every waiter tried once. The hand-off message is
// lost; the waiter must still get the key before the waiter queued behind
// it, within two claim windows of the release.
func TestHalfOpenSubscriptionKeepsPlaceWhenReleasedAfterRecheck(t *testing.T) {
	srv, admin := newReal(t)
	proxy := startBlackHoleProxy(t, srv.Addr)
	wrdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = wrdb.Close() })
	waiter := locktest.NewClient(t, wrdb)
	holder := locktest.NewClient(t, srv.Client(t))
	behind := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	key := "adv-half-open-" + randKey()
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(time.Minute))
	first, firstRes := lockAsync(waiter, ctx, key)
	waitQueued(t, admin, key, 1)
	waitSubscribed(t, admin, key, 1)
	second, secondRes := lockAsync(behind, ctx, key)
	waitQueued(t, admin, key, 2)
	waitSubscribed(t, admin, key, 2)

	within(t, proxy.cutAfterNextDelivery(), 10*time.Second, "a delivery on the pub/sub connection")
	cut := time.Now()
	time.Sleep(time.Until(cut.Add(1400 * time.Millisecond)))
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	select {
	case <-first:
	case <-second:
		if secondRes.err != nil {
			t.Fatal(secondRes.err)
		}
		t.Errorf("the waiter queued behind got the key first, %v after the release (%v after the cut)",
			secondRes.at.Sub(released), secondRes.at.Sub(cut))
		_ = secondRes.unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("neither waiter got the key within 10 s of the release")
	}
	within(t, first, 10*time.Second, "the waiter on the half-open connection")
	if firstRes.err != nil {
		t.Fatal(firstRes.err)
	}
	took := firstRes.at.Sub(released)
	_ = firstRes.unlock()
	t.Logf("the waiter on the half-open connection got the key %v after the release", took)
	if took > 2*time.Second {
		t.Errorf("the waiter on the half-open connection got the key %v after the release, want within two claim windows (2 s)", took)
	}
}
