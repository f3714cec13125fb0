package lock_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Real processes, all SIGKILLed: the holder is a child that releases and
// exits at once (no check of its own), the receiver's process A queued
// two waiters ahead of the live one, and a process B one behind it. The
// watchers looked for are the first waiters of other Clients than A's
// behind the receiver (the live one among them) and the last one: the
// live waiter must get the key within two claim windows.
func TestLiveWaiterBetweenKilledProcesses(t *testing.T) {
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "watchers-killed-" + randKey()
	holder := startReleaser(t, srv.Addr, key)
	holder.held(t)
	a := locktest.StartChild(t, fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,%d,%d", srv.Addr, key, 2, 2), "queued")
	live, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 3)
	b := locktest.StartChild(t, fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,%d,%d", srv.Addr, key, 1, 4), "queued")
	waitSubscribed(t, rdb, key, 3)
	time.Sleep(50 * time.Millisecond)
	for _, p := range []*exec.Cmd{a, b} {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
	queue := rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()

	holder.release(t) // hands the key to A's first waiter and exits
	handed := time.Now()
	if o := ownerIn(t, rdb, key); len(queue) != 4 || o != queue[0] {
		t.Fatalf("premise: queue %q, key handed to %q", queue, o)
	}
	waitTaken(t, live, res, handed, 2500*time.Millisecond, "the live waiter")
}

// No Client closes or dies but the one dead process A: the holder stays
// up. The key goes to a waiter Q that gives up before it heard (its
// pub/sub is slow); leave.lua hands it on to A's first waiter. No release
// made that hand-off, so no releasing Client checks it: leave.lua tells
// every Client with a queued waiter, and the live waiter between A's
// waiters must get the key within two claim windows.
func TestLeaveHandOffToDeadProcessIsWatched(t *testing.T) {
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "watchers-leave-" + randKey()
	holder := locktest.NewClient(t, srv.Client(t))
	gate := newPubsubGate()
	grdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: gate.dialer})
	t.Cleanup(func() { _ = grdb.Close() })
	quitter := locktest.NewClient(t, grdb)
	t.Cleanup(gate.release) // before the Clients close

	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	qdone, qres := lockAsync(quitter, qctx, key)
	waitQueued(t, rdb, key, 1)
	queueDeadWaiter(t, rdb, key, "deadA:1")
	queueDeadWaiter(t, rdb, key, "deadA:2")
	live, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 4)
	queueDeadWaiter(t, rdb, key, "deadA:3")
	waitQueued(t, rdb, key, 5)
	waitSubscribed(t, rdb, key, 2)
	time.Sleep(50 * time.Millisecond)

	gate.shut()
	if err := unlock(); err != nil { // to the quitter, which does not hear of it
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	within(t, qdone, 2*time.Second, "the quitter")
	if qres.err == nil {
		t.Fatal("premise: the quitter got the key although its pub/sub was held back")
	}
	deadline := time.Now().Add(2 * time.Second)
	for ownerIn(t, rdb, key) != "deadA:1" {
		if time.Now().After(deadline) {
			t.Fatalf("premise: the quitter's leave did not hand the key to deadA:1 (owner %q)", ownerIn(t, rdb, key))
		}
		time.Sleep(5 * time.Millisecond)
	}
	handed := time.Now()
	gate.release()
	waitTaken(t, live, res, handed, 2500*time.Millisecond, "the live waiter")
}
