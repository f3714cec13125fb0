package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (issue 33, "Fair and without polling"): a dead waiter costs at
// most the claim window, as for Lock. A waiter of a SIGKILLed process is
// first in the queue; the holder (live, lease 12 s) releases and the key's
// room is handed to the dead waiter; a live waiter behind it must get in
// within two 1 s claim windows of the release (the bound the Lock tests
// use, scaled for a busy machine).
//
// The hand-off's watchers (queue.lua's watch, told by share.lua's hand)
// try just after the window: the live waiter gets in about 1.0 s after
// the release (before, when only the receiver was told, it slept until
// the soonest lease end it had been told: 7.5-7.9 s with an 8 s lease).
func TestLivenessSharedDeadWaiterCostsClaimWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                 string
		hold, dead, liveKind string
	}{
		{"semaphore", "p", "wait-p", "p"},
		{"writer dead behind a reader", "r", "wait-w", "r"},
		{"reader dead behind a writer", "w", "wait-r", "w"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "sh-deadwaiter-" + randKey()
			holder := locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(sharedHolderLease))
			unlock := sharedTake(t, holder, ctx, tc.hold, key)
			child := locktest.StartChild(t, sharedChildEnv(tc.dead, srv.Addr, key, 1, sharedHolderLease, 1), "queued")
			live := locktest.NewClient(t, srv.Client(t))
			done := make(chan struct{})
			var got time.Time
			var err error
			go func() {
				defer close(done)
				var u lock.UnlockFunc
				_, u, err = sharedCall(live, context.Background(), tc.liveKind, key, lock.WithMaxWait(sharedHolderLease+10*time.Second))
				got = time.Now()
				if err == nil {
					_ = u()
				}
			}()
			waitQueued(t, rdb, key, 2)
			_ = child.Process.Kill()
			_ = child.Wait()
			time.Sleep(100 * time.Millisecond) // its connections are gone
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
			released := time.Now()
			locktest.Within(t, done, sharedHolderLease+15*time.Second, "live waiter returned")
			if err != nil {
				t.Fatalf("live waiter: %v", err)
			}
			d := got.Sub(released)
			t.Logf("live waiter got in %v after the release handed the room to a dead waiter", d)
			if d > twoWindows() {
				t.Errorf("live waiter got in %v after the release to a SIGKILLed waiter, want within %v (two 1 s claim windows): it slept until the holder's lease (%v) would have ended",
					d, twoWindows(), sharedHolderLease)
			}
		})
	}
}

// sharedHolderLease is the holder's lease in TestLivenessSharedDeadWaiterCostsClaimWindow:
// long enough that sleeping until it ends is told from two claim windows
// under the race detector on a busy machine (6 s).
const sharedHolderLease = 12 * time.Second

// sharedCall takes key as kind says: p a permit of limit 1, r a read hold,
// w a Lock.
func sharedCall(c *lock.Client, ctx context.Context, kind, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	switch kind {
	case "p":
		return c.Acquire(ctx, key, 1, opts...)
	case "r":
		return c.RLock(ctx, key, opts...)
	}
	return c.Lock(ctx, key, opts...)
}

// sharedTake is sharedCall that fails the test on an error.
func sharedTake(t *testing.T, c *lock.Client, ctx context.Context, kind, key string, opts ...lock.LockOption) lock.UnlockFunc {
	t.Helper()
	_, u, err := sharedCall(c, ctx, kind, key, opts...)
	if err != nil {
		t.Fatalf("%s %q: %v", kind, key, err)
	}
	return u
}
