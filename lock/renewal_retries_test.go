package lock_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// retriesClaim is how docs/operations.md quotes the number of renewal
// attempts a lease gets while Redis cannot be reached.
var retriesClaim = regexp.MustCompile(`renewal is tried about (\d+) times`)

// TestRenewalAttemptsBeforeLoss: with Redis unreachable from the first
// renewal on, the watchdog tries to renew a lease every twelfth of it from
// a third of it until the validity ends (about 8 attempts, over the last
// two thirds of the lease, 20 s of the default 30 s) before the holder
// is told, each a twelfth of the lease after the last was sent once that
// one failed. docs/operations.md quotes the count: this test keeps the
// two in step. The Redis client fails at once (one dial, no retry), as
// go-redis's retries fail well within a twelfth of the default lease.
func TestRenewalAttemptsBeforeLoss(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := retriesClaim.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/operations.md does not say %q", retriesClaim)
	}
	claimed, _ := strconv.Atoi(string(m[1]))

	mr, _ := locktest.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr, DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	rec := &recorder{}
	c := locktest.NewClient(t, rdb, lock.WithObserver(rec))
	const lease = 1200 * time.Millisecond // renewed every 400 ms, retried every 100 ms
	lctx, _ := locktest.MustLock(t, c, context.Background(), "k", lock.WithLease(lease))
	start := time.Now()
	mr.Close() // every renewal fails: connection refused
	<-lctx.Done()
	lostAfter := time.Since(start)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	failed := 0
	for _, r := range rec.renewals {
		if r.Err != nil {
			failed++
		}
	}
	if failed < claimed-1 || failed > claimed+1 {
		t.Errorf("%d failed renewal attempts before the loss (%v after Redis went away), docs/operations.md says about %d", failed, lostAfter, claimed)
	}
	if context.Cause(lctx) != lock.ErrLost || lostAfter > lease {
		t.Errorf("lock context ended with %v %v after Redis went away, want ErrLost within the %v lease", context.Cause(lctx), lostAfter, lease)
	}
}
