package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Adversarial review of 2026-11-28: slow-pub/sub mode (first waiters poll
// every 100 ms for 10 s) must turn on for late hand-off messages only.

// TestNoPollingAfterRedisStallWithHealthyPubSub ("while waiting, Lock does
// not poll"; slow-pub/sub mode is for a subscription that delivers late):
// Redis freezes for 400 ms while a waiter's first attempt is on its way
// (a second waiter of its Client for a key), then answers it. The pub/sub connection is healthy: the hand-off that
// follows arrives at once. Yet a waiter that then waits for another key,
// whose holder keeps it for a minute, must not send commands: over a
// second its Client sends at most one.
func TestNoPollingAfterRedisStallWithHealthyPubSub(t *testing.T) {
	srv, admin := newReal(t)
	holder := locktest.NewClient(t, srv.Client(t))
	wrdb := srv.Client(t)
	waiter := locktest.NewClient(t, wrdb)
	ctx := context.Background()
	k1, k2 := "adv-stall-poll-1-"+randKey(), "adv-stall-poll-2-"+randKey()
	_, unlock1 := locktest.MustLock(t, holder, ctx, k1, lock.WithLease(time.Minute))
	_, unlock2 := locktest.MustLock(t, holder, ctx, k2, lock.WithLease(time.Minute))
	defer unlock2()

	first1, firstRes1 := lockAsync(waiter, ctx, k1)
	waitQueued(t, admin, k1, 1)
	waitSubscribed(t, admin, k1, 1)

	srv.Pause()
	got1, res1 := lockAsync(waiter, ctx, k1) // its attempt waits for Redis
	time.Sleep(400 * time.Millisecond)
	srv.Resume()
	waitQueued(t, admin, k1, 2)
	if err := unlock1(); err != nil { // handed to the first waiter, told at once
		t.Fatal(err)
	}
	acquired(t, first1, firstRes1, "the first waiter of the released key")
	_ = firstRes1.unlock()
	acquired(t, got1, res1, "the second waiter of the released key")
	_ = res1.unlock()

	waiting2, _ := lockAsync(waiter, ctx, k2)
	waitQueued(t, admin, k2, 1)
	waitSubscribed(t, admin, k2, 1)
	cc := locktest.CountCommands(wrdb)
	time.Sleep(time.Second)
	if n := cc.N(); n > 1 {
		t.Errorf("a Client whose one waiter waits for a key held for a minute sent %d commands in the second after a 400 ms Redis stall with a healthy subscription, want none (polling)", n)
	}
	select {
	case <-waiting2:
		t.Fatal("the waiter of the held key returned")
	default:
	}
}
