package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// The holder is a child process that releases and exits at once (no check
// of its own), handing the key to a dead waiter (deadA:1) at the front of
// queues of 2 to 19 waiters, dead ones of processes A to D and one live
// waiter: only the watchers the hand-off tells can notice the dead
// receiver, and the live waiter must get the key within two claim windows
// wherever it stands. Before the last watcher was the last waiter of a
// Client not told yet, the queue's last waiter was the watcher even when it
// was of the receiver's Client, and the live waiter behind two other dead
// Clients, or 17th behind the receiver, got the key only when the holder's
// lease ran out (8 s).
func TestLiveWaiterWhereverItStands(t *testing.T) {
	t.Parallel()
	deadA := func(n int) []string { // waiters of the receiver's process
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf("deadA:%d", i+2))
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		queue []string // "live", or the owner of a dead waiter; the first gets the key
	}{
		{"right behind the receiver", []string{"deadA:1", "live"}},
		{"last of 16", append(append([]string{"deadA:1"}, deadA(14)...), "live")},
		{"last of 17", append(append([]string{"deadA:1"}, deadA(15)...), "live")},
		{"last of 18", append(append([]string{"deadA:1"}, deadA(16)...), "live")},
		{"last of 18, two dead Clients in front", append(append([]string{"deadA:1", "deadB:1", "deadC:1"}, deadA(14)...), "live")},
		{"16th behind, a dead Client last", append(append([]string{"deadA:1"}, deadA(15)...), "live", "deadD:1")},
		{"17th behind, the receiver's Client last", append(append([]string{"deadA:1"}, deadA(15)...), "deadB:1", "live", "deadA:99")},
		{"behind two dead Clients, the receiver's Client last", []string{"deadA:1", "deadB:1", "deadC:1", "live", "deadA:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "releaser-exits-" + randKey()
			holder := startReleaser(t, srv.Addr, key)
			holder.held(t)
			var live <-chan struct{}
			var res *lockResult
			for i, w := range tc.queue {
				if w == "live" {
					live, res = lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
					waitQueued(t, rdb, key, int64(i+1))
					waitSubscribed(t, rdb, key, 1)
					time.Sleep(50 * time.Millisecond) // the attempt after the subscription made
					continue
				}
				queueDeadWaiter(t, rdb, key, w)
				waitQueued(t, rdb, key, int64(i+1))
			}
			holder.release(t)
			handed := time.Now()
			if o := ownerIn(t, rdb, key); o != tc.queue[0] {
				t.Fatalf("premise: the key went to %q, want %s", o, tc.queue[0])
			}
			waitTaken(t, live, res, handed, 2500*time.Millisecond, "the live waiter")
		})
	}
}
