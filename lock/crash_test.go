package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestCrashFreesKey kills a holder process with SIGKILL: the key must be
// free again within one lease (1 s), with no unlock ever sent.
func TestCrashFreesKey(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv, rdb := newReal(t)
	cmd := locktest.StartChild(t, "LOCKKIT_CHILD_HOLD="+srv.Addr, "held")

	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	if _, _, err := c.TryLock(ctx, "crash"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock while the child holds = %v, want ErrNotObtained", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_, unlock := locktest.MustLock(t, c, ctx, "crash", lock.WithMaxWait(3*time.Second))
	defer unlock()
	if d := time.Since(killed); d > time.Second+locktest.Bound(500*time.Millisecond) {
		t.Fatalf("key free %v after the kill, want within the 1 s lease", d)
	} else {
		t.Logf("key free %v after SIGKILL (lease 1 s)", d)
	}
}
