package lock_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

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
	t.Parallel()
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
