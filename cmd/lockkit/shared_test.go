package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Semaphores and read-write locks in ls, show, unlock and watch: the
// kind, how many of the limit are held, each holder, readers and the
// writer, the queue.

// acquire takes a permit of key (limit) on c, failing the test otherwise,
// and returns its token and unlock.
func acquire(t *testing.T, c *lock.Client, key string, limit int) (uint64, lock.UnlockFunc) {
	t.Helper()
	ctx, unlock, err := c.Acquire(context.Background(), key, limit)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := lock.FencingToken(ctx, key)
	return tok, unlock
}

// shown is the value of show's line "label: value".
func shown(out, label string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, label+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func TestLsAndShowSemaphorePermits(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	url := "redis://" + srv.Addr
	ctx := context.Background()
	tokA, unlockA := acquire(t, holder(t, rdb, "a"), "reports:acme", 3)
	defer unlockA()
	tokB, unlockB := acquire(t, holder(t, rdb, "b"), "reports:acme", 3)
	defer unlockB()

	code, out, errOut := lockkit(t, ctx, url, "", "ls")
	if code != exitOK || !strings.Contains(out, "reports:acme") || !strings.Contains(out, "2 of 3 permits") {
		t.Fatalf("ls: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = lockkit(t, ctx, url, "", "ls", "-o", "json")
	var got jsonInfo
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("ls -o json: %d\n%s", code, out)
	}
	if got.Kind != lock.KindSemaphore || got.Limit != 3 || got.Holding != 2 || len(got.Permits) != 2 ||
		got.Permits[0].Owner.Label != "a" || got.Permits[0].Token != tokA || got.Permits[1].Owner.Label != "b" || got.Permits[1].Token != tokB ||
		got.Permits[0].HoldCount != 1 || got.Permits[0].RemainingLeaseMS <= 0 || got.Permits[0].Write || got.Holder != nil {
		t.Fatalf("ls -o json: %+v", got)
	}

	code, out, _ = lockkit(t, ctx, url, "", "show", "reports:acme")
	for _, want := range []string{"semaphore", "held, 2 of 3 permits", "permit, count 1, token " + token(tokA), "permit, count 1, token " + token(tokB), "waiting:"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("show: %d, want %q in\n%s", code, want, out)
		}
	}
}

func TestShowReadWriteReadersAndQueue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	url := "redis://" + srv.Addr
	ctx := context.Background()
	_, unlockR, err := holder(t, rdb, "reader").RLock(ctx, "config")
	if err != nil {
		t.Fatal(err)
	}
	defer unlockR()
	gotW := lockLater(t, holder(t, rdb, "writer"), "config")
	waitQueue(t, rdb, "lockkit:{config}:queue")
	late := make(chan lock.UnlockFunc, 1)
	go func() {
		_, unlock, err := holder(t, rdb, "late").RLock(ctx, "config")
		if err != nil {
			t.Error(err)
			unlock = func() error { return nil }
		}
		late <- unlock
	}()
	locktest.Eventually(t, 5*time.Second, "2 queued", func() bool { return rdb.LLen(ctx, "lockkit:{config}:queue").Val() == 2 })

	code, out, _ := lockkit(t, ctx, url, "", "show", "config")
	for _, want := range []string{"read-write", "held, 1 reader", "read, count 1", "writer", "(reader), waited"} {
		if code != exitOK || !strings.Contains(out, want) || shown(out, "waiting") != "2" {
			t.Fatalf("show: %d, want %q and 2 waiting in\n%s", code, want, out)
		}
	}
	_ = unlockR()
	unlockW := <-gotW
	code, out, _ = lockkit(t, ctx, url, "", "show", "config")
	for _, want := range []string{"held, writer writer", "write, count 1", "late"} {
		if code != exitOK || !strings.Contains(out, want) || shown(out, "waiting") != "1" {
			t.Fatalf("show: %d, want %q and 1 waiting in\n%s", code, want, out)
		}
	}
	_ = unlockW()
	unlockLate := <-late
	_ = unlockLate()
}

// TestUnlockForceSemaphoreEndsTheHoldersShown: a confirmed unlock ends
// the holders it showed, one by one, and not one that came after.
func TestUnlockForceSemaphoreEndsTheHoldersShown(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	tokA, unlockA := acquire(t, holder(t, rdb, "a"), "reports", 3)
	defer unlockA()
	_, unlockB := acquire(t, holder(t, rdb, "b"), "reports", 3)
	defer unlockB()

	pw, errOut, _, code := prompted(t, "redis://"+srv.Addr, "reports")
	for _, want := range []string{"is a semaphore: 2 of 3 permits", "a ", "b ", "token " + token(tokA)} {
		if !strings.Contains(errOut.String(), want) {
			t.Fatalf("prompt: want %q in\n%s", want, errOut.String())
		}
	}
	after := holder(t, rdb, "after")
	_, unlockAfter := acquire(t, after, "reports", 3)
	defer unlockAfter()
	if _, err := io.WriteString(pw, "y\n"); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != exitOK {
		t.Fatalf("confirmed: exit %d\n%s", c, errOut.String())
	}
	info, err := after.Inspect(ctx, "reports")
	if err != nil || info.Holding != 1 || info.Permits[0].Owner.Label != "after" || !info.Forced {
		t.Fatalf("after the unlock: %+v, %v: want the holder that came after alone", info, err)
	}

	code2, out, _ := lockkit(t, ctx, "redis://"+srv.Addr, "", "unlock", "--force", "--yes", "-o", "json", "reports")
	var f jsonForced
	if code2 != exitOK || json.Unmarshal([]byte(out), &f) != nil || len(f.Permits) != 1 || f.Permits[0].Owner.Label != "after" || f.Holder.Label != "after" {
		t.Fatalf("--yes -o json: %d %s", code2, out)
	}
}

func TestWatchSemaphore(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	rdb.ConfigSet(context.Background(), "notify-keyspace-events", "Kghlx")
	out, stop := watchRun(t, "redis://"+srv.Addr, "sem")
	waitOutput(t, out, "free; 0 waiting")
	_, unlockA := acquire(t, holder(t, rdb, "a"), "sem", 2)
	waitOutput(t, out, "semaphore 1 of 2 permits: a")
	_, unlockB := acquire(t, holder(t, rdb, "b"), "sem", 2)
	defer unlockB()
	waitOutput(t, out, "semaphore 2 of 2 permits: a")
	if err := unlockA(); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, "semaphore 2 of 2 permits: a", "released by a", "semaphore 1 of 2 permits: b")
	if code, errOut := stop(); code != exitOK {
		t.Fatalf("watch: %d %s", code, errOut)
	}
}
