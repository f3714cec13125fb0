package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestFencingTokensIncrease(t *testing.T) {
	mr, rdb := locktest.Mini(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	var last uint64
	for i := range 1000 {
		lctx, unlock, err := c.TryLock(ctx, "fence", lock.WithFixedLease(time.Minute))
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		tok, ok := lock.FencingToken(lctx, "fence")
		if !ok || tok <= last {
			t.Fatalf("acquisition %d: token %d (ok %v) after %d", i, tok, ok, last)
		}
		last = tok
		if i%100 == 99 {
			// Let this one expire in Redis instead of unlocking it.
			mr.FastForward(2 * time.Minute)
			if mr.Exists("lockkit:{fence}") {
				t.Fatal("lease did not expire")
			}
		}
		if err := unlock(); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
	}
	if _, ok := lock.FencingToken(ctx, "fence"); ok {
		t.Fatal("FencingToken ok for a context that holds nothing")
	}
	if keys := mr.Keys(); len(keys) != 1 || keys[0] != "lockkit:{fence}:fence" {
		t.Fatalf("keys left: %v, want only the fencing counter", keys)
	}
}
