package lock_test

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantees (issue 33): a dead holder's permit or read hold comes back
// within one lease; a holder frozen past its lease (SIGSTOP) finds its
// context cancelled with cause ErrLost when it runs again, and meanwhile
// at most limit holders hold. Holders are child processes with a 1 s
// lease; the live waiter must get in within the lease plus slack of the
// fault, and the frozen holder, resumed, must report ErrLost.
func TestLivenessSharedDeadOrFrozenHolderComesBackWithinLease(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	for _, tc := range []struct {
		name, hold, live string
		limit            int
		signal           syscall.Signal
	}{
		{"permit of 2, holder killed", "hold-p", "p", 2, syscall.SIGKILL},
		{"permit of 2, holder frozen", "hold-p", "p", 2, syscall.SIGSTOP},
		{"reader killed, writer waits", "hold-r", "w", 1, syscall.SIGKILL},
		{"reader frozen, writer waits", "hold-r", "w", 1, syscall.SIGSTOP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "sh-deadholder-" + randKey()
			var holders []*exec.Cmd
			for range tc.limit {
				holders = append(holders, locktest.StartChild(t, sharedChildEnv(tc.hold, srv.Addr, key, tc.limit, lease, 0), "held"))
			}
			live := locktest.NewClient(t, srv.Client(t))
			var lctx context.Context
			var unlock lock.UnlockFunc
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				if tc.live == "p" {
					lctx, unlock, err = live.Acquire(ctx, key, tc.limit, lock.WithMaxWait(20*time.Second))
				} else {
					lctx, unlock, err = live.Lock(ctx, key, lock.WithMaxWait(20*time.Second))
				}
			}()
			waitQueued(t, rdb, key, 1)
			victim := holders[0].Process
			if err := victim.Signal(tc.signal); err != nil {
				t.Fatal(err)
			}
			faulted := time.Now()
			if tc.signal == syscall.SIGSTOP {
				t.Cleanup(func() { _ = victim.Signal(syscall.SIGCONT) })
			}
			locktest.Within(t, done, 20*time.Second, "the live waiter")
			if err != nil {
				t.Fatalf("live waiter: %v", err)
			}
			defer func() { _ = unlock() }()
			d := time.Since(faulted)
			t.Logf("live waiter got in %v after the fault (lease %v)", d, lease)
			if d > lease+locktest.Bound(500*time.Millisecond) {
				t.Errorf("a %v holder's hold came back %v after the fault, want within its lease %v (plus slack)", tc.signal, d, lease)
			}
			if tc.signal != syscall.SIGSTOP {
				return
			}
			if err := victim.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			ev, rerr := rdb.BLPop(ctx, locktest.Bound(2*time.Second), sharedEvents(key)).Result()
			if rerr != nil {
				t.Fatalf("the resumed holder did not report its context ended: %v", rerr)
			}
			if !strings.Contains(ev[1], lock.ErrLost.Error()) {
				t.Errorf("the resumed holder's context ended with %q, want ErrLost", ev[1])
			}
			if lctx.Err() != nil {
				t.Errorf("the live waiter's hold ended: %v", context.Cause(lctx))
			}
		})
	}
}
