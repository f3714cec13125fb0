package lock_test

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestFrozenThenKilledReceiverDoesNotStallKey (guarantee 6: "A hand-off to
// a dead waiter is noticed by the releasing Client", and a released key
// whose first waiters belong to dead processes is obtainable within two
// claim windows): the key is handed to the waiter of a process frozen
// (SIGSTOP: its subscription still takes the message) and SIGKILLed right
// after. The releasing Client is alive. The watchers Redis picks (the
// first two other Clients behind the receiver, and the last waiter) belong
// to processes killed before; a live waiter of a third Client stands among
// them. It must get the key within two claim windows of the release.
func TestFrozenThenKilledReceiverDoesNotStallKey(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "adv-frozen-receiver-" + randKey()
	releaser := locktest.NewClient(t, srv.Client(t))
	_, unlock := locktest.MustLock(t, releaser, ctx, key, lock.WithLease(time.Minute))
	child := func(want int) *exec.Cmd {
		return locktest.StartChild(t, fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,%d,%d", srv.Addr, key, 1, want), "queued")
	}
	receiver := child(1)
	dead := []*exec.Cmd{child(2), child(3)}
	live, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(10*time.Second))
	waitQueued(t, rdb, key, 4)
	dead = append(dead, child(5)) // the last waiter
	waitSubscribed(t, rdb, key, 5)
	for _, p := range dead {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
	waitSubscribed(t, rdb, key, 2)
	queue := rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()
	_ = receiver.Process.Signal(syscall.SIGSTOP)
	if err := unlock(); err != nil { // hands the key to the frozen receiver
		t.Fatal(err)
	}
	handed := time.Now()
	_ = receiver.Process.Kill()
	_ = receiver.Wait()
	if o := ownerIn(t, rdb, key); len(queue) != 5 || o != queue[0] {
		t.Fatalf("premise: queue %q, key handed to %q", queue, o)
	}
	waitTaken(t, live, res, handed, 2500*time.Millisecond, "the live waiter")
}
