package lock_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Close leaves no goroutine behind: each test runs in a process of its own
// (locktest.OwnProcess) and checks the whole process.

// lockGoroutines returns, by goroutine header, the stacks of the
// goroutines that run code of package lock (not its tests).
func lockGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "lockkit/lockkit/lock.") && !strings.Contains(g, "_test.go") {
			id, _, _ := strings.Cut(g, " [")
			out[id] = g
		}
	}
	return out
}

// noNewLockGoroutinesWithin fails t when goroutines of package lock that
// were not in before are still there limit after now.
func noNewLockGoroutinesWithin(t *testing.T, before map[string]string, limit time.Duration, what string) {
	t.Helper()
	var left []string
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		left = left[:0]
		for id, g := range lockGoroutines() {
			if _, ok := before[id]; !ok {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
	}
	t.Errorf("%s: %d goroutines of package lock left after %v, first:\n%s", what, len(left), limit, left[0])
}

// TestCloseStopsPingerAndSlowPolling (no goroutine outlives Close): a
// Client whose pub/sub connection delivers 300-400 ms late (slow-pub/sub
// mode: its first waiters poll) and then goes half-open (its health
// check waits for a PING answer) closes with waiters queued. Close
// returns within 1 s, and once rdb is closed no goroutine of the Client is
// left.
func TestCloseStopsPingerAndSlowPolling(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	srv, admin := newReal(t)
	proxy := locktest.StartProxy(t, srv.Addr)
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
	proxy.SlowPubSub(300*time.Millisecond, 400*time.Millisecond)
	// Hand-offs to c's waiters, told late: slow-pub/sub mode.
	for range 3 {
		_, unlock := locktest.MustLock(t, holder, ctx, key)
		done, res := lockAsync(c, ctx, key)
		waitQueued(t, admin, key, 1)
		_ = unlock()
		locktest.Within(t, done, 5*time.Second, "c's Lock")
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
	proxy.SlowPubSub(0, 0) // slow mode lasts 10 s; the cut needs a delivery in time
	locktest.Within(t, proxy.CutPubSubAfterNextDelivery(), 10*time.Second, "a delivery on the pub/sub connection")
	time.Sleep(1500 * time.Millisecond) // the health check waits for its PING's answer
	if took := timed(func() { _ = c.Close() }); took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v", took)
	}
	for _, done := range waiting {
		locktest.Within(t, done, time.Second, "a waiter after Close")
	}
	_ = wrdb.Close()
	_ = unlock()
	_ = holder.Close()
	noNewLockGoroutinesWithin(t, before, 200*time.Millisecond, "after Close and rdb.Close")
}

// Close on a frozen Redis with go-redis ReadTimeout -1, while a lock is
// held, a waiter waits and a new subscription is being made: once Close
// returned and the Redis client is closed (as Close's documentation says
// to do to end calls still under way), no goroutine of the Client is left.
func TestNoGoroutineLeftAfterCloseOnFrozenRedis(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	srv, _ := newReal(t)
	before := goleak.IgnoreCurrent()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: -1})
	c, err := lock.New(rdb, lock.WithDefaultLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	locktest.MustLock(t, c, ctx, "k")
	waiting := make(chan struct{})
	go func() { defer close(waiting); _, _, _ = c.Lock(ctx, "k") }()
	waitSubscribed(t, srv.Client(t), "k", 1)
	srv.Pause()
	t.Cleanup(srv.Resume)
	cut := make(chan struct{})
	go func() { // a new key: its subscription is asked for during the stall
		defer close(cut)
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, _, _ = c.Lock(cctx, "new")
	}()
	time.Sleep(400 * time.Millisecond)
	took := timed(func() { _ = c.Close() })
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v", took)
	}
	<-waiting
	<-cut
	_ = rdb.Close()
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after Close and rdb.Close on a frozen Redis: %v", err)
	}
}

// Close with checks pending, and Close racing a check as it fires, leaves
// no goroutine behind.
func TestCloseWithPendingChecksLeavesNoGoroutine(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	srv, rdb := newReal(t)
	ctx := context.Background()
	before := goleak.IgnoreCurrent()
	for i, wait := range []time.Duration{0, 500 * time.Millisecond, 990 * time.Millisecond, 1000 * time.Millisecond, 1005 * time.Millisecond, 1010 * time.Millisecond} {
		c, err := lock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		for k := range 20 {
			key := fmt.Sprintf("ho-close-%d-%d", i, k)
			_, unlock := locktest.MustLock(t, c, ctx, key)
			queueDeadWaiter(t, rdb, key, "dead:1")
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(wait)
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > locktest.Bound(time.Second) {
			t.Errorf("Close %v after 20 hand-offs took %v", wait, d)
		}
	}
	goleak.VerifyNone(t, before)
}

// TestCloseWhileSubscriptionReconnects: the pub/sub connection is killed
// and Redis stalls at once, so the receive loop is reconnecting (its new
// connection's HELLO unanswered, go-redis ReadTimeout -1: no read
// deadline at all) when Close is called. Close returns within 1 s; the
// goroutine stuck in go-redis's read ends when Redis answers again, as
// Close's doc says, and then none is left.
func TestCloseWhileSubscriptionReconnects(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	srv, admin := newReal(t)
	before := goleak.IgnoreCurrent()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: -1})
	c, err := lock.New(rdb, lock.WithDefaultLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "close-reconnect-" + randKey()
	holdByGhost(t, admin, key, time.Minute) // no goroutines of a holder to tell apart
	done, _ := lockAsync(c, ctx, key)
	waitSubscribed(t, admin, key, 1)
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	time.Sleep(300 * time.Millisecond) // the loop saw the EOF and redials
	took := timed(func() { _ = c.Close() })
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v while the subscription reconnected to a stalled Redis", took)
	}
	locktest.Within(t, done, time.Second, "the waiter after Close")
	srv.Resume()
	_ = rdb.Close()
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after Close, Redis answering again and rdb.Close: %v", err)
	}
}
