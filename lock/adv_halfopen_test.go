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

// TestCloseStopsPingerAndSlowPolling (no goroutine outlives Close): a
// Client whose pub/sub connection delivers 300-400 ms late (slow-pub/sub
// mode: its first waiters poll) and then goes half-open (its health
// check waits for a PING answer) closes with waiters queued. Close
// returns within 1 s, and once rdb is closed no goroutine of the Client is
// left.
func TestCloseStopsPingerAndSlowPolling(t *testing.T) {
	srv, admin := newReal(t)
	proxy := startBlackHoleProxy(t, srv.Addr)
	before := lockGoroutines()
	wrdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	defer wrdb.Close()
	c, err := lock.New(wrdb)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ctx := context.Background()
	key := "adv-close-pinger-" + randKey()
	proxy.slowPubSub(300*time.Millisecond, 400*time.Millisecond)
	// Hand-offs to c's waiters, told late: slow-pub/sub mode.
	for range 3 {
		_, unlock := locktest.MustLock(t, holder, ctx, key)
		done, res := lockAsync(c, ctx, key)
		waitQueued(t, admin, key, 1)
		_ = unlock()
		within(t, done, 5*time.Second, "c's Lock")
		if res.err != nil {
			t.Fatal(res.err)
		}
		_ = res.unlock()
	}
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(time.Minute))
	var waiting []<-chan struct{}
	for range 5 {
		done, _ := lockAsync(c, ctx, key)
		waiting = append(waiting, done)
	}
	waitQueued(t, admin, key, 5)
	proxy.slowPubSub(0, 0) // slow mode lasts 10 s; the cut needs a delivery in time
	within(t, proxy.cutAfterNextDelivery(), 10*time.Second, "a delivery on the pub/sub connection")
	time.Sleep(1500 * time.Millisecond) // the health check waits for its PING's answer
	if took := timed(func() { _ = c.Close() }); took > time.Second {
		t.Errorf("Close took %v", took)
	}
	for _, done := range waiting {
		within(t, done, time.Second, "a waiter after Close")
	}
	_ = wrdb.Close()
	_ = unlock()
	_ = holder.Close()
	noNewLockGoroutinesWithin(t, before, 200*time.Millisecond, "after Close and rdb.Close")
}
