package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (issue 33, "Bounded memory": every key with a TTL): a
// semaphore's wait queue always has a TTL. The holder (lease 30 s)
// releases to a waiter of a SIGKILLed process, which empties the queue
// list while the waits hash keeps that waiter's entry and its TTL (about
// 31 s, from the holder's lease); a live waiter then queues.
//
// A hand-off takes its receiver out of the queue list and the waits hash
// together, so the waits hash never outlives the list and a new list gets
// its TTL from enqueue.
func TestTTLSharedQueueKept(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "sh-qttl-" + randKey()
	holder := locktest.NewClient(t, srv.Client(t))
	_, unlock, err := holder.Acquire(ctx, key, 1)
	if err != nil {
		t.Fatal(err)
	}
	child := locktest.StartChild(t, sharedChildEnv("wait-p", srv.Addr, key, 1, 30*time.Second, 1), "queued")
	_ = child.Process.Kill()
	_ = child.Wait()
	if err := unlock(); err != nil { // hands the permit to the dead waiter
		t.Fatal(err)
	}
	live := locktest.NewClient(t, srv.Client(t))
	go func() { _, _, _ = live.Acquire(ctx, key, 1, lock.WithMaxWait(10*time.Second)) }()
	waitQueued(t, rdb, key, 1)
	base := "lockkit:{" + key + "}"
	for _, k := range []string{base, base + ":queue", base + ":waits"} {
		d, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: PTTL %v", k, d)
		if d == -1 {
			t.Errorf("%s has no TTL", k)
		}
	}
}
