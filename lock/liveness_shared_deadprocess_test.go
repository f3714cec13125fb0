package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (issue 33: "A dead waiter costs at most the claim window, as
// for Lock"; Lock's TestKilledProcessesWaitersHoldUpKeyTwoWindowsAtMost
// and TestHandOffToKilledProcessesObtainableByTryLock): SIGKILLed
// processes with waiters queued hold up a released key about one claim
// window in all, not one per waiter. Here the holder of a semaphore of 1
// (or a reader, or a writer) releases with 1 process × 10 or 5 processes
// × 2 waiters queued (3 × 2 readers), all killed, and nobody else queued: TryAcquire
// (TryRLock, TryLock) every 10 ms must get in within two 1 s claim windows
// of the release.
//
// A lapsed hand-off marks its Client dead, and the next fill drops its
// waiters and skips those of Clients with no subscription (share.lua's
// fill): about 1.0 s in every case (before, one window per dead waiter:
// 6.0-6.4 s for six, 10 s for ten).
func TestLivenessSharedKilledProcessesHoldUpKeyAWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, dead  string
		procs, each int
	}{
		{"p", "wait-p", 1, 10},
		{"p", "wait-p", 5, 2},
		{"r", "wait-w", 1, 10}, // dead writers behind a reader
		{"w", "wait-r", 3, 2},  // dead readers behind a writer: handed together
	} {
		t.Run(fmt.Sprintf("%s %d×%d", tc.dead, tc.procs, tc.each), func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "sh-deadprocs-" + randKey()
			holder := locktest.NewClient(t, srv.Client(t))
			unlock := sharedTake(t, holder, ctx, tc.kind, key)
			for i := range tc.procs {
				child := locktest.StartChild(t, sharedChildEnv(tc.dead, srv.Addr, key, 1, 30*time.Second, tc.each*(i+1)), "queued")
				_ = child.Process.Kill()
				_ = child.Wait()
			}
			if n := queueLen(t, rdb, key); n != int64(tc.procs*tc.each) {
				t.Fatalf("premise: %d dead waiters queued, want %d", n, tc.procs*tc.each)
			}
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
			poller := locktest.NewClient(t, srv.Client(t))
			d := sharedObtainableAfter(poller, tc.kind, key, 20*time.Second)
			t.Logf("TryAcquire/TryLock got in %v after the release, behind %d killed processes × %d waiters (-1: not within 20 s)", d, tc.procs, tc.each)
			if d < 0 || d > twoWindows() {
				t.Errorf("the key obtainable only %v after the release (-1: not within 20 s) behind %d killed processes × %d waiters; want within two 1 s claim windows (%v)",
					d, tc.procs, tc.each, twoWindows())
			}
		})
	}
}

// sharedObtainableAfter tries key every 10 ms (TryAcquire of 1 for kind p,
// TryRLock for r, TryLock for w) and returns how long until it got in, -1 when not
// within limit.
func sharedObtainableAfter(c *lock.Client, kind, key string, limit time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < limit {
		var u lock.UnlockFunc
		var err error
		switch kind {
		case "p":
			_, u, err = c.TryAcquire(context.Background(), key, 1)
		case "r":
			_, u, err = c.TryRLock(context.Background(), key)
		default:
			_, u, err = c.TryLock(context.Background(), key)
		}
		if err == nil {
			d := time.Since(start)
			_ = u()
			return d
		}
		time.Sleep(10 * time.Millisecond)
	}
	return -1
}
