package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestHeldPatternMatchesEscapedKeys: Held's pattern is a glob over the
// user's keys, but it is matched against the escaped names in Redis, so
// '?' and classes miss keys with '%', '{' or '}' (stored as three bytes).
func TestHeldPatternMatchesEscapedKeys(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	for _, tc := range []struct{ key, pattern string }{
		{"a%", "a?"},
		{"b{", "b?"},
		{"c}", "c[}]"},
		{"d%", "d[%]"},
	} {
		_, unlock := locktest.MustLock(t, c, ctx, tc.key)
		found := false
		for info, err := range c.Held(ctx, tc.pattern) {
			if err != nil {
				t.Fatalf("Held(%q): %v", tc.pattern, err)
			}
			found = found || info.Key == tc.key
		}
		if !found {
			t.Errorf("Held(%q) does not list the held key %q", tc.pattern, tc.key)
		}
		_ = unlock()
	}
}

// TestLeaveHandOffKeepsTTL: when the first waiter gives up after the
// holder's lease ran out (the lock hash is gone, the queue is not: it
// outlives the lease by the claim window), leave.lua hands the lock to the
// next waiter with PEXPIRE before HSET on a missing key, so the new hash
// has no TTL: if that waiter's process is dead the key is held forever.
func TestLeaveHandOffKeepsTTL(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	name := "lockkit:{stuck}"
	// A holder whose process died: its lease runs out later in the test.
	if err := rdb.HSet(ctx, name, "o", "deadholder@h:1:1", "n", 1, "t", 7).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, name, 30*time.Second)

	w := locktest.NewClient(t, rdb)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, _, err := w.Lock(wctx, "stuck")
		done <- err
	}()
	waitQueued(t, rdb, "stuck", 1)
	// A waiter behind it whose process died a moment ago: its deadline
	// (the lease left plus the claim window) is still ahead.
	tm, _ := rdb.Time(ctx).Result()
	now := tm.UnixMilli()
	dead := "deadwaiter@h:2:1"
	rdb.RPush(ctx, name+":queue", dead)
	rdb.HSet(ctx, name+":waits", dead, now+20000, ">"+dead, now)
	// The holder's lease ends (expiry deletes the hash), then the first
	// waiter gives up before its next attempt.
	rdb.Del(ctx, name)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for rdb.HGet(ctx, name, "o").Val() != dead {
		if time.Now().After(deadline) {
			t.Fatalf("the lock was not handed to the next waiter: %v", rdb.HGetAll(ctx, name).Val())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if ttl := rdb.PTTL(ctx, name).Val(); ttl < 0 {
		t.Fatalf("lock handed to %s with no TTL (PTTL %v): held forever by a dead waiter", dead, ttl)
	}
}

// TestQuorumForceUnlockWithoutMajority: in quorum mode ForceUnlock
// reports success when a single node answered, although the holder still
// has a majority: once the other nodes answer again its renewals go
// through and it keeps the key (there are no fencing tokens in quorum
// mode to stop its writes). It should fail unless the hold was ended on
// enough nodes that the holder cannot keep a majority.
func TestQuorumForceUnlockWithoutMajority(t *testing.T) {
	srvs, clients := quorumOf(t, 3)
	ctx := context.Background()
	x := newQuorum(t, clients(), lock.WithDefaultLease(3*time.Second))
	held, unlock := locktest.MustLock(t, x, ctx, "q")
	defer unlock()
	op := newQuorum(t, clients(), lock.WithNodeTimeout(100*time.Millisecond))

	srvs[1].Pause()
	srvs[2].Pause()
	fctx, cancel := context.WithTimeout(ctx, time.Second)
	f, err := op.ForceUnlock(fctx, "q")
	cancel()
	srvs[1].Resume()
	srvs[2].Resume()
	if err != nil {
		return // refused: nothing to check
	}
	// ForceUnlock said the hold was ended: the holder must lose it.
	select {
	case <-held.Done():
		if !errors.Is(context.Cause(held), lock.ErrLost) {
			t.Fatalf("hold ended with %v", context.Cause(held))
		}
	case <-time.After(6 * time.Second): // two leases: several renewals
		info, _ := op.Inspect(ctx, "q")
		t.Fatalf("ForceUnlock reported %+v (nil error) with one node of three answering; the holder still holds the key on a majority 6 s later: %+v", f, info.Holder)
	}
}
