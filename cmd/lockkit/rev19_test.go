package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// syncBuffer is a bytes.Buffer safe to read while a run writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// prompted starts unlock --force key with a stdin that stays open and
// waits until it asks for confirmation. It returns the stdin's writer,
// stderr, the cancel of the run's context and the run's exit code.
func prompted(t *testing.T, url, key string) (*io.PipeWriter, *syncBuffer, context.CancelFunc, <-chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	var out, errOut syncBuffer
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

// heldOn starts a redis-server where a Client labelled label holds key
// until the test ends, and returns its URL and a client of it.
func heldOn(t *testing.T, label, key string) (string, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	_, unlock := locktest.MustLock(t, holder(t, rdb, label), context.Background(), key)
	t.Cleanup(func() { _ = unlock() })
	return "redis://" + srv.Addr, rdb
}

// TestUnlockPromptEndsOnInterrupt: main turns SIGINT into the run's
// context ending, but the confirmation prompt reads stdin without
// watching the context, so Ctrl-C at "Force-unlock? [y/N]" does nothing.
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

// TestUnlockForceEndsTheHolderConfirmed: the prompt shows one holder, but
// ForceUnlock then ends whoever holds the key when the operator answers:
// if the shown holder released meanwhile and another took the key, the
// innocent new holder is force-unlocked (so is the waiter the key was
// handed to, when two operators force the same key at once).
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
	if !info.Held || info.Holder.Label != "innocent" {
		t.Fatalf("the operator confirmed ending stuck's hold; the command (exit %d) ended innocent's instead: %+v\n%s", c, info, errOut.String())
	}
}

// TestTableOutputEscapesKeys: keys are any bytes, often built from user
// input, but ls and show print them raw: a newline forges a table row, a
// tab shifts the columns, an escape sequence reaches the operator's
// terminal.
func TestTableOutputEscapesKeys(t *testing.T) {
	key := "orders:1\npayments:9\tother-7 web-2/17\t1\t30s\t99\t0\x1b[2J"
	url, _ := heldOn(t, "real", key)
	ctx := context.Background()
	code, out, errOut := lockkit(t, ctx, url, "", "ls")
	if code != exitOK {
		t.Fatalf("ls: %d %s", code, errOut)
	}
	if n := strings.Count(out, "\n"); n != 2 || strings.ContainsAny(out, "\x1b") {
		t.Errorf("ls printed the key raw: %d lines, want a header and one row:\n%s", n, out)
	}
	code, out, _ = lockkit(t, ctx, url, "", "show", key)
	if code != exitOK || strings.ContainsAny(out, "\x1b") || strings.HasPrefix(strings.SplitN(out, "\n", 3)[1], "payments:9") {
		t.Errorf("show printed the key raw:\n%s", out)
	}
}

// TestBadRedisURL: an unparseable -redis URL is bad usage (exit 2, as
// documented for an invalid argument), not a Redis failure (exit 1), and
// the error must not print the URL's password (it ends up in CI logs and
// terminals' scroll-back).
func TestBadRedisURL(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{
		"redis://app:s3cret@127.0.0.1:6379/abc",
		"rediss://:s3cret@127.0.0.1:6379?dial_timeout=x",
		"redis://app:s3cret@127.0.0.1:6379,redis://app:s3cret@127.0.0.1:6380/x",
	} {
		code, _, errOut := lockkit(t, ctx, url, "", "show", "k")
		if code != exitUsage || strings.Contains(errOut, "s3cret") {
			t.Errorf("REDIS_URL %s: exit %d, want %d without the password:\n%s", url, code, exitUsage, errOut)
		}
	}
}

// TestLongKeyListedCanBeForced: a key longer than 128 bytes is stored by
// its digest; ls lists it by its Redis name, but neither show nor unlock
// --force accept what ls printed, so the operator cannot take a stuck
// long-keyed lock away with the command.
func TestLongKeyListedCanBeForced(t *testing.T) {
	key := "reports:" + strings.Repeat("x", 200)
	url, _ := heldOn(t, "stuck", key)
	ctx := context.Background()
	code, out, errOut := lockkit(t, ctx, url, "", "ls", "-o", "json")
	var got jsonInfo
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("ls: %d %s %s", code, out, errOut)
	}
	listed := keyOf(lock.LockInfo{Key: got.Key, Name: got.Name})
	code, out, errOut = lockkit(t, ctx, url, "", "unlock", "--force", "--yes", listed)
	if code != exitOK {
		t.Fatalf("ls listed %q; unlock --force --yes of it: exit %d %s%s", listed, code, out, errOut)
	}
}

// TestWatchClusterWithoutNotifications: without keyspace notifications
// watch says it still sees "hand-offs, turns and lease ends", but on a
// Redis Cluster it subscribes to no channel at all (sharded channels take
// no pattern; docs/operations.md says it needs the notifications there): a
// hand-off shows only when the old holder's lease would have ended, 30 s
// later by default. Either watch shows it or it must not claim to.
func TestWatchClusterWithoutNotifications(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	ctx := context.Background()
	_, unlockA := locktest.MustLock(t, holder(t, rdb, "first"), ctx, "k")
	out, stop := watchRun(t, "redis://"+cl.Masters[0].Addr, "k")
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	waitOutput(t, out, "held by first")
	gotB := make(chan lock.UnlockFunc, 1)
	go func() {
		_, unlock, err := holder(t, rdb, "second").Lock(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		gotB <- unlock
	}()
	for start := time.Now(); rdb.LLen(ctx, "lockkit:{k}:queue").Val() == 0; time.Sleep(2 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("never queued")
		}
	}
	if err := unlockA(); err != nil {
		t.Fatal(err)
	}
	unlockB := <-gotB
	defer unlockB()
	timeout := time.After(5 * time.Second)
	for !strings.Contains(out.seen, "held by second") {
		select {
		case line := <-out.lines:
			out.seen += line + "\n"
			continue
		case <-timeout:
		}
		stopped = true
		_, errOut := stop()
		if strings.Contains(errOut, "hand-offs") {
			t.Fatalf("watch says it sees hand-offs without notifications, but shows none 5 s after one:\n%s%s", out.seen, errOut)
		}
		return
	}
}

// TestBadFlagsAreUsage: flags the lock package refuses are bad usage
// (exit 2), and a -quorum list naming one server twice must be refused
// (lock.NewQuorum refuses the same client twice, but the command makes a
// client per URL): that server's answer would count twice toward the
// majority.
func TestBadFlagsAreUsage(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	url := "redis://" + srv.Addr
	for _, args := range [][]string{
		{"-prefix", "a{", "ls"},
		{"-quorum", "-redis", url + "," + url + "," + url, "show", "k"},
	} {
		code, out, errOut := lockkit(t, ctx, url, "", args...)
		if code != exitUsage {
			t.Errorf("lockkit %q: exit %d, want %d\n%s%s", args, code, exitUsage, out, errOut)
		}
	}
}

// TestJSONKeyRoundTrips: keys are bytes, but -o json writes them as JSON
// strings, which turns bytes that are not UTF-8 into U+FFFD: a script
// that reads the key back from ls -o json cannot show or force that lock.
func TestJSONKeyRoundTrips(t *testing.T) {
	key := "bin:\xff\xfe"
	url, _ := heldOn(t, "stuck", key)
	ctx := context.Background()
	code, out, errOut := lockkit(t, ctx, url, "", "ls", "-o", "json")
	var got jsonInfo
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("ls: %d %s %s", code, out, errOut)
	}
	code, out, errOut = lockkit(t, ctx, url, "", "show", "-o", "json", got.Key)
	var shown jsonInfo
	if code != exitOK || json.Unmarshal([]byte(out), &shown) != nil || !shown.Held {
		t.Fatalf("ls -o json gave key %q for %q; show of it: exit %d, held %v %s", got.Key, key, code, shown.Held, errOut)
	}
}
