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
// ends the hold on every node; its Forced.Holder is the majority's
// holder, and this Client's own hold ends before ForceUnlock returns, as
// ForceUnlock's doc says.
func TestQuorumForceUnlockNamesMajorityHolder(t *testing.T) {
	t.Parallel()
	_, clients := quorumOf(t, 3)
	rdbs := clients()
	ctx := context.Background()
	c := newQuorum(t, clients(), lock.WithOwnerLabel("majority"))
	held, unlock := locktest.MustLock(t, c, ctx, "qf")
	defer func() { _ = unlock() }()
	// Lock returned at the majority's answer, so the third node may or may
	// not have the hold: give another owner a node without it, or else
	// the last one.
	ghost := rdbs[2].(*redis.Client)
	for _, rdb := range rdbs {
		if !locktest.Held(t, rdb.(*redis.Client), "lockkit:{qf}") {
			ghost = rdb.(*redis.Client)
		}
	}
	holdByGhost(t, ghost, "qf", 30*time.Second)
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

// TestForceUnlockIfHeldByReentrantHolder: IfHeldBy names a holder that
// re-entered its hold: the whole hold ends (every level), both unlocks
// return ErrLost, and the next holder's token is larger.
func TestForceUnlockIfHeldByReentrantHolder(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	holder := locktest.NewClient(t, rdb, lock.WithDefaultLease(3*time.Second))
	op := locktest.NewClient(t, rdb)
	outer, unlockOuter := locktest.MustLock(t, holder, ctx, "reent")
	inner, unlockInner := locktest.MustLock(t, holder, outer, "reent")
	info, err := op.Inspect(ctx, "reent")
	if err != nil || info.HoldCount != 2 {
		t.Fatalf("Inspect: %+v, %v; want a hold count of 2", info, err)
	}
	f, err := op.ForceUnlock(ctx, "reent", lock.IfHeldBy(info.Holder.ID))
	if err != nil || f.Holder.ID != info.Holder.ID {
		t.Fatalf("ForceUnlock IfHeldBy the re-entered holder: %+v, %v", f, err)
	}
	locktest.Within(t, inner.Done(), 2*time.Second, "the inner level's end (next renewal)")
	if err := unlockInner(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("inner unlock: %v, want ErrLost", err)
	}
	if err := unlockOuter(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("outer unlock: %v, want ErrLost", err)
	}
	_, unlock := locktest.MustLock(t, op, ctx, "reent")
	defer func() { _ = unlock() }()
	if next, _ := op.Inspect(ctx, "reent"); next.Token <= f.Token {
		t.Errorf("next token %d, not above the forced holder's %d", next.Token, f.Token)
	}
}
