package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestQuorumForceUnlockNamesMajorityHolder: in quorum mode this Client
// holds a key on a majority of nodes while a minority node has another
// owner (a contender's partial acquisition, not yet undone). ForceUnlock
// ends the hold on every node; its Forced.Holder must be the majority's
// holder, and this Client's own hold must end before ForceUnlock returns,
// as ForceUnlock's doc says. ForceUnlock keeps the holder of whichever
// node answered last, so it reports the minority's owner and leaves its
// own hold to the watchdog.
func TestQuorumForceUnlockNamesMajorityHolder(t *testing.T) {
	_, clients := quorumOf(t, 3)
	rdbs := clients()
	ctx := context.Background()
	c := newQuorum(t, clients(), lock.WithOwnerLabel("majority"))
	held, unlock := locktest.MustLock(t, c, ctx, "qf")
	defer func() { _ = unlock() }()
	// The last node: another owner.
	holdByGhost(t, rdbs[2].(*redis.Client), "qf", 30*time.Second)
	info, err := c.Inspect(ctx, "qf")
	if err != nil || info.Holder.Label != "majority" {
		t.Fatalf("Inspect: holder %+v, %v; want this Client's hold on the majority", info.Holder, err)
	}
	f, err := c.ForceUnlock(ctx, "qf")
	if err != nil {
		t.Fatal(err)
	}
	if f.Holder.Label != "majority" {
		t.Errorf("ForceUnlock reports holder %q, want the majority's holder %q", f.Holder.ID, info.Holder.ID)
	}
	if context.Cause(held) != lock.ErrLost {
		t.Errorf("this Client's hold did not end before ForceUnlock returned (cause %v)", context.Cause(held))
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("unlock after the force: %v, want ErrLost", err)
	}
}
