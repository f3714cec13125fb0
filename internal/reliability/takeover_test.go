package reliability_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestTakeoverEndsHold gives a held key another owner behind the
// holder's back, as a promoted replica that missed the holder's
// acquisition, or a Redis restarted empty without delay, lets another
// Client do: the holder's next renewal must find the owner changed and end
// the hold with lock.ErrLost, within one renewal interval (a third of the
// 1 s lease) plus a margin, and leave the other owner's lease as it was;
// its unlock must report the loss and leave the other owner in place.
func TestTakeoverEndsHold(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	lctx, unlock, err := leaseClient(t, rdb, lease).Lock(ctx, "takeover")
	if err != nil {
		t.Fatal(err)
	}
	const hash = "lockkit:{takeover}" // see docs/design.md
	if err := rdb.HSet(ctx, hash, "o", "another:1").Err(); err != nil {
		t.Fatal(err)
	}
	taken := now()
	select {
	case <-lctx.Done():
	case <-time.After(lease/3 + 500*time.Millisecond):
		t.Fatalf("holder still live %v after another owner took its key", lease/3+500*time.Millisecond)
	}
	told := now()
	if cause := context.Cause(lctx); !errors.Is(cause, lock.ErrLost) {
		t.Fatalf("holder's context ended with %v, want lock.ErrLost", cause)
	}
	ttl, err := rdb.PTTL(ctx, hash).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := lease - time.Duration(told-taken); ttl > left+50*time.Millisecond {
		t.Errorf("other owner's lease %v after the takeover: extended beyond the %v left of it", ttl, left)
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("unlock after the takeover: %v, want lock.ErrLost", err)
	}
	if o, err := rdb.HGet(ctx, hash, "o").Result(); o != "another:1" || err != nil {
		t.Errorf("owner after the old holder's unlock: %q (%v), want the other owner", o, err)
	}
	t.Logf("holder told %s after another owner took its key; that owner's lease had %v left", ms(told-taken), ttl)
}
