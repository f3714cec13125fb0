package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestCloseLeavesQueueAfterShortStall (guarantee 7: "Its waiting Lock
// calls have left the Redis queue when it returns"): 10 waiters of the
// closing Client are queued behind another Client's hold; Redis freezes
// just before Close and resumes 500 ms into it. Close returns within 1 s
// and, since Redis answered in time, none of its waiters is left in the
// queue.
func TestCloseLeavesQueueAfterShortStall(t *testing.T) {
	t.Parallel()
	srv, admin := newReal(t)
	holder := locktest.NewClient(t, srv.Client(t))
	crdb := srv.Client(t)
	c, err := lock.New(crdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "adv-close-stall-" + randKey()
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(time.Minute))
	defer unlock()
	const n = 10
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.Lock(ctx, key); !errors.Is(err, lock.ErrClosed) {
				t.Errorf("waiter = %v, want ErrClosed", err)
			}
		}()
	}
	waitQueued(t, admin, key, n)
	srv.Pause()
	resumed := time.AfterFunc(500*time.Millisecond, srv.Resume)
	defer resumed.Stop()
	took := timed(func() { _ = c.Close() })
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v", took)
	}
	srv.Resume()
	left := admin.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()
	if len(left) > 0 {
		t.Errorf("Close returned after %v with %d of its %d waiters still in the Redis queue (Redis answered again 500 ms into Close)", took, len(left), n)
	}
	wg.Wait()
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
