package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// TestWatchClusterWithoutNotifications: on a Redis Cluster without
// keyspace notifications watch subscribes to no channel (sharded channels
// take no pattern), so either it shows a hand-off or its warning does not
// claim that hand-offs are seen.
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
	gotB := lockLater(t, holder(t, rdb, "second"), "k")
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
