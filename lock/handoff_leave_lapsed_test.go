package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// The key is handed to a dead waiter (deadA) by a process that exits at
// once. The watchers told are a waiter W whose pub/sub path is slow (it
// does not hear the message), a dead waiter deadB and the dead last one
// deadX; the live waiter L behind deadB is not told. W gives up after the
// receiver's claim window lapsed: leaving, it finds the lock free and the
// waiter at the front past its deadline, drops it and opens the next turn
// to every queued waiter, so L must get the key within two claim windows
// ("whatever other waiters do").
func TestWatcherLeavingAfterLapseOpensNextTurn(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "leave-lapsed-" + randKey()
	holder := startReleaser(t, srv.Addr, key) // it exits at its release: no check of its own
	holder.held(t)
	gate := newPubsubGate()
	grdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: gate.dialer})
	t.Cleanup(func() { _ = grdb.Close() })
	quitter := locktest.NewClient(t, grdb)
	t.Cleanup(gate.release) // before the Clients close

	queueDeadWaiter(t, rdb, key, "deadA:1")
	waitQueued(t, rdb, key, 1)
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	qdone, _ := lockAsync(quitter, qctx, key)
	waitQueued(t, rdb, key, 2)
	queueDeadWaiter(t, rdb, key, "deadB:1")
	waitQueued(t, rdb, key, 3)
	live, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 4)
	queueDeadWaiter(t, rdb, key, "deadX:1")
	waitQueued(t, rdb, key, 5)
	waitSubscribed(t, rdb, key, 2)
	time.Sleep(50 * time.Millisecond)

	gate.shut()
	holder.release(t)
	handed := time.Now()
	if o := ownerIn(t, rdb, key); o != "deadA:1" {
		t.Fatalf("premise: the key went to %q, want deadA:1", o)
	}
	time.Sleep(1300*time.Millisecond - time.Since(handed)) // the receiver's window has lapsed
	if locktest.Held(t, rdb, "lockkit:{"+key+"}") {
		t.Fatal("premise: the dead receiver's claim window has not lapsed")
	}
	cancel()
	locktest.Within(t, qdone, 2*time.Second, "the waiter giving up")
	gate.release()
	waitTaken(t, live, res, handed, 2500*time.Millisecond, "the live waiter")
}
