package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
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
	if d < 0 || d > 2500*time.Millisecond {
		t.Errorf("key obtainable by TryLock only %v after the release (-1: not within 10 s), behind %d killed processes' waiters; want within two 1 s claim windows", d, procs)
	}
}
