package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The release hands the key to a waiter whose process was SIGKILLed, with
// waiters of two more SIGKILLed processes behind it, and nobody else
// queued: the only caller left polls with TryLock (as a health check or a
// "run if free" job would). The contract: a released key whose next
// waiters are dead or gone is obtainable within two claim windows,
// whatever other waiters do.
func TestHandOffToKilledProcessesObtainableByTryLock(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	const procs = 4
	srv, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	ctx := context.Background()
	const key = "ho-deadtry"
	_, unlock := locktest.MustLock(t, holder, ctx, key)
	for i := range procs {
		env := fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,%d,%d", srv.Addr, key, 1, i+1)
		child := locktest.StartChild(t, env, "queued")
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if !locktest.Held(t, rdb, "lockkit:{"+key+"}") {
		t.Fatal("the release did not hand the key to the first (dead) waiter")
	}
	d := obtainableAfter(holder, key, 10*time.Second)
	t.Logf("TryLock got the key %v after the release, behind %d killed processes' waiters (-1: not within 10 s)", d, procs)
	if d < 0 || d > 2*time.Second+locktest.Bound(500*time.Millisecond) {
		t.Errorf("key obtainable by TryLock only %v after the release (-1: not within 10 s), behind %d killed processes' waiters; want within two 1 s claim windows", d, procs)
	}
}

// TestLeaveHandOffKeepsTTL: when the first waiter gives up after the
// holder's lease ran out (the lock hash is gone, the queue is not: it
// outlives the lease by the claim window), leave.lua hands the lock to the
// next waiter, and the hash it creates has a TTL: a dead waiter does not
// hold the key forever.
func TestLeaveHandOffKeepsTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	name := "lockkit:{stuck}"
	// A holder whose process died: its lease runs out later in the test.
	if err := rdb.HSet(ctx, name, "o", "deadholder@h:1:1", "n", 1, "t", 7).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, name, 30*time.Second)

	wrdb := srv.Client(t)
	sc := locktest.CountCommands(wrdb)
	w := locktest.NewClient(t, wrdb)
	_, unlockWarm := locktest.MustLock(t, w, ctx, "warm") // the scripts cached: one command per attempt
	if err := unlockWarm(); err != nil {
		t.Fatal(err)
	}
	warm := sc.Scripts()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, _, err := w.Lock(wctx, "stuck")
		done <- err
	}()
	// The waiter queued with its first attempt and, once subscribed, made
	// one more: it is idle now until the holder's lease would end, so no
	// attempt of its takes the key once the hash is gone.
	locktest.Eventually(t, 5*time.Second, "the waiter's two scripts answered", func() bool { return sc.Scripts() >= warm+2 })
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
	locktest.Eventually(t, 5*time.Second, "the lock handed to the next waiter", func() bool { return rdb.HGet(ctx, name, "o").Val() == dead })
	if ttl := rdb.PTTL(ctx, name).Val(); ttl < 0 {
		t.Fatalf("lock handed to %s with no TTL (PTTL %v): held forever by a dead waiter", dead, ttl)
	}
}
