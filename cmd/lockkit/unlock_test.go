package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// prompted starts unlock --force key with a stdin that stays open and
// waits until it asks for confirmation. It returns the stdin's writer,
// stderr, the cancel of the run's context and the run's exit code.
func prompted(t *testing.T, url, key string) (*io.PipeWriter, *locktest.SyncBuffer, context.CancelFunc, <-chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	var out, errOut locktest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"unlock", "--force", key}, env{
			stdin: pr, stdout: &out, stderr: &errOut,
			getenv: func(name string) string {
				if name == "REDIS_URL" {
					return url
				}
				return ""
			},
		})
	}()
	for start := time.Now(); !strings.Contains(errOut.String(), "[y/N]"); time.Sleep(2 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no prompt: %s", errOut.String())
		}
	}
	return pw, &errOut, cancel, code
}

// TestUnlockPromptEndsOnInterrupt: Ctrl-C (the run's context ending, as
// main makes SIGINT) at the confirmation prompt ends the command at once,
// as not confirmed, and changes nothing.
func TestUnlockPromptEndsOnInterrupt(t *testing.T) {
	url, rdb := heldOn(t, "stuck", "orders:42")
	pw, errOut, interrupt, code := prompted(t, url, "orders:42")
	interrupt() // what SIGINT does in main
	select {
	case c := <-code:
		if c == exitOK || !locktest.Held(t, rdb, "lockkit:{orders:42}") {
			t.Fatalf("interrupted prompt: exit %d, key held %v\n%s", c, locktest.Held(t, rdb, "lockkit:{orders:42}"), errOut.String())
		}
	case <-time.After(time.Second):
		_ = pw.Close() // let the run end
		<-code
		t.Fatalf("unlock --force still waits for an answer 1 s after SIGINT")
	}
}

// TestUnlockForceEndsTheHolderConfirmed: the command ends only the holder
// the operator was shown and confirmed: when that holder released
// meanwhile and another process took the key, the new holder keeps it
// and the command says so (exit 3).
func TestUnlockForceEndsTheHolderConfirmed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	_, unlockStuck := locktest.MustLock(t, holder(t, rdb, "stuck"), ctx, "orders:42")

	pw, errOut, _, code := prompted(t, "redis://"+srv.Addr, "orders:42")
	if !strings.Contains(errOut.String(), "held by stuck") {
		t.Fatalf("prompt: %s", errOut.String())
	}
	// While the operator reads, the stuck holder finishes and another
	// process takes the key.
	if err := unlockStuck(); err != nil {
		t.Fatal(err)
	}
	innocent := holder(t, rdb, "innocent")
	_, unlock := locktest.MustLock(t, innocent, ctx, "orders:42")
	defer unlock()
	if _, err := io.WriteString(pw, "y\n"); err != nil {
		t.Fatal(err)
	}
	c := <-code
	info, err := innocent.Inspect(ctx, "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Holder.Label != "innocent" || c != exitNotHeld || !strings.Contains(errOut.String(), "changed hands") {
		t.Fatalf("the operator confirmed ending stuck's hold; the command (exit %d) ended innocent's instead: %+v\n%s", c, info, errOut.String())
	}
}

// TestLongKeyListedCanBeForced: a key longer than 128 bytes is stored by
// its digest and ls lists it by its Redis name; unlock --force (like
// show) takes that name.
func TestLongKeyListedCanBeForced(t *testing.T) {
	key := "reports:" + strings.Repeat("x", 200)
	url, _ := heldOn(t, "stuck", key)
	ctx := context.Background()
	got := lsOne(t, url)
	listed := keyOf(lock.LockInfo{Key: got.Key, Name: got.Name})
	code, out, errOut := lockkit(t, ctx, url, "", "unlock", "--force", "--yes", listed)
	if code != exitOK {
		t.Fatalf("ls listed %q; unlock --force --yes of it: exit %d %s%s", listed, code, out, errOut)
	}
}
