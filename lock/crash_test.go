package lock_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// TestCrashFreesKey kills a holder process with SIGKILL: the key must be
// free again within one lease (1 s), with no unlock ever sent.
func TestCrashFreesKey(t *testing.T) {
	srv, rdb := newReal(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCKKIT_CHILD_HOLD="+srv.Addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("child: %q %v", line, err)
	}

	c := newClient(t, rdb)
	ctx := context.Background()
	if _, _, err := c.TryLock(ctx, "crash"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock while the child holds = %v, want ErrNotObtained", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_, unlock := mustLock(t, c, ctx, "crash", lock.WithMaxWait(3*time.Second))
	defer unlock()
	if d := time.Since(killed); d > 1500*time.Millisecond {
		t.Fatalf("key free %v after the kill, want within the 1 s lease", d)
	} else {
		t.Logf("key free %v after SIGKILL (lease 1 s)", d)
	}
}
