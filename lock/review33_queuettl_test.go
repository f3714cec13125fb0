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
// Observed (go test -count=1 -run TestReview33QueueKeepsTTL ./lock, and
// once in TestReview33EveryKeyHasTTL of a full -race run): the new queue
// list has no TTL (PTTL -1). share.lua's hand pops the receiver off the
// list (deleting it when empty) but leaves it in the waits hash;
// queue.lua's enqueue then RPUSHes a new list and sets the TTLs of both
// keys only when the waits hash's TTL is shorter than the new deadline,
// which the dead waiter's 31 s is not. Were the live waiter's process to
// die too, the list would stay in Redis for good.
func TestReview33QueueKeepsTTL(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "r33-qttl-" + randKey()
	holder := locktest.NewClient(t, srv.Client(t))
	_, unlock, err := holder.Acquire(ctx, key, 1)
	if err != nil {
		t.Fatal(err)
	}
	child := locktest.StartChild(t, r33Env("wait-p", srv.Addr, key, 1, 30*time.Second, 1), "queued")
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
