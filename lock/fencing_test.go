package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestFencingTokensIncrease(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
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
		if i%100 == 50 {
			// Let this one expire in Redis instead of unlocking it: every
			// key of the lock is gone, and the next token still larger.
			mr.FastForward(2 * time.Minute)
			if keys := mr.Keys(); len(keys) != 0 {
				t.Fatalf("keys left after the lease lapsed: %v", keys)
			}
			if err := unlock(); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("unlock %d after its lease lapsed in Redis = %v, want ErrLost", i, err)
			}
			continue
		}
		if err := unlock(); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
	}
	if _, ok := lock.FencingToken(ctx, "fence"); ok {
		t.Fatal("FencingToken ok for a context that holds nothing")
	}
	// The released lock's hash stays a second at most, free, and is all
	// that is left.
	if keys := mr.Keys(); len(keys) != 1 || keys[0] != "lockkit:{fence}" || mr.TTL(keys[0]) > time.Second || locktest.Held(t, rdb, keys[0]) {
		t.Fatalf("keys left: %v (TTL %v), want only the free lock hash, for 1 s at most", keys, mr.TTL("lockkit:{fence}"))
	}
}
