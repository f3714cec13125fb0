package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestForceUnlockFences: the old holder learns of the loss at its next
// renewal, its unlock reports it, the queued waiter gets the key with a
// larger token, and storage that checks tokens rejects the old holder.
func TestForceUnlockFences(t *testing.T) {
	_, rdb := newReal(t)
	ctx := context.Background()
	old := locktest.NewClient(t, rdb, lock.WithOwnerLabel("stuck"))
	lease := 600 * time.Millisecond // renewed every 200 ms
	held, unlock := locktest.MustLock(t, old, ctx, "orders:42", lock.WithLease(lease))
	_, unlockInner := locktest.MustLock(t, old, held, "orders:42")
	oldToken, _ := lock.FencingToken(held, "orders:42")
	done := queueWaiters(t, rdb, "orders:42", 1)

	waiter := locktest.NewClient(t, rdb, lock.WithOwnerLabel("next"))
	next := locktest.TokenWhenLocked(t, waiter, ctx, "orders:42")
	waitQueued(t, rdb, "orders:42", 2)

	op := locktest.NewClient(t, rdb, lock.WithOwnerLabel("operator"))
	f, err := op.ForceUnlock(ctx, "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	if f.Holder.Label != "stuck" || f.Token != oldToken || f.HandedTo.Label != "w0" || f.NewToken != oldToken+1 {
		t.Fatalf("forced %+v: want stuck's token %d handed to w0 with %d", f, oldToken, oldToken+1)
	}
	if err := <-done[0]; err != nil {
		t.Fatalf("w0: %v", err)
	}
	if tok := <-next; tok <= oldToken+1 {
		t.Fatalf("next waiter's token %d, want more than %d", tok, oldToken+1)
	}
	// The old holder's watchdog ends its hold at the next renewal: within
	// a third of the lease, plus a generous allowance for a slow machine.
	within(t, held.Done(), lease, "the old holder's loss")
	if cause := context.Cause(held); cause != lock.ErrLost {
		t.Fatalf("old holder's cause %v, want ErrLost", cause)
	}
	if err := unlockInner(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("old inner unlock: %v, want ErrLost", err)
	}
	if err := unlock(); !errors.Is(err, lock.ErrNotHeld) && !errors.Is(err, lock.ErrLost) {
		t.Fatalf("old unlock: %v, want ErrLost", err)
	}
	info, err := op.Inspect(ctx, "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held {
		t.Fatalf("after both waiters: %+v", info)
	}
}

// TestForceUnlockWithoutWaiters: the key is free at once and the next
// acquisition's token is larger; the old holder's unlock reports ErrLost
// even though the free hash still names it.
func TestForceUnlockWithoutWaiters(t *testing.T) {
	_, rdb := newReal(t)
	ctx := context.Background()
	old := locktest.NewClient(t, rdb)
	held, unlock := locktest.MustLock(t, old, ctx, "k")
	oldToken, _ := lock.FencingToken(held, "k")
	op := locktest.NewClient(t, rdb, lock.WithOwnerLabel("operator"))
	f, err := op.ForceUnlock(ctx, "k")
	if err != nil || f.HandedTo.ID != "" || f.Token != oldToken {
		t.Fatalf("ForceUnlock: %+v, %v", f, err)
	}
	info, err := op.Inspect(ctx, "k")
	if err != nil || info.Held || !info.Forced || info.LastReleasedBy.Label != "operator" {
		t.Fatalf("after the force: %+v, %v: want free, forced by operator", info, err)
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("old unlock: %v, want ErrLost", err)
	}
	lctx, unlockNew := locktest.MustLock(t, op, ctx, "k")
	defer unlockNew()
	if tok, _ := lock.FencingToken(lctx, "k"); tok <= oldToken {
		t.Fatalf("next token %d, want more than %d", tok, oldToken)
	}
}

func TestForceUnlockRefusesFreeKey(t *testing.T) {
	_, rdb := newReal(t)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb)
	other := locktest.NewClient(t, rdb, lock.WithPrefix("other"))
	_, unlock := locktest.MustLock(t, other, ctx, "k") // another prefix's lock
	defer unlock()
	_, unlockReleased := locktest.MustLock(t, c, ctx, "released")
	_ = unlockReleased()
	for _, key := range []string{"never", "released", "k"} {
		before := rdb.Keys(ctx, "*").Val()
		_, err := c.ForceUnlock(ctx, key)
		if !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("ForceUnlock(%q): %v, want ErrNotHeld", key, err)
		}
		if after := rdb.Keys(ctx, "*").Val(); len(after) != len(before) {
			t.Errorf("ForceUnlock(%q) changed keys: %v -> %v", key, before, after)
		}
	}
	if !locktest.Held(t, rdb, "other:{k}") {
		t.Fatal("the other prefix's lock was touched")
	}
}

func TestForceUnlockQuorum(t *testing.T) {
	_, clients := quorumOf(t, 3)
	rdbs := clients()
	ctx := context.Background()
	old := newQuorum(t, rdbs, lock.WithOwnerLabel("stuck"), lock.WithDefaultLease(600*time.Millisecond))
	held, unlock := locktest.MustLock(t, old, ctx, "q")
	defer unlock()
	op := newQuorum(t, clients(), lock.WithOwnerLabel("operator"))
	info, err := op.Inspect(ctx, "q")
	if err != nil || !info.Held || info.Holder.Label != "stuck" || len(info.Nodes) != 3 {
		t.Fatalf("Inspect: %+v, %v", info, err)
	}
	heldOn := 0 // a quorum's acquisition returns at the majority's answer
	for _, n := range info.Nodes {
		if n.Node == "" || n.Err != nil {
			t.Fatalf("node %+v: want its address and no error", n)
		}
		if n.Held {
			heldOn++
		}
	}
	if heldOn < 2 {
		t.Fatalf("held on %d nodes, want at least 2: %+v", heldOn, info.Nodes)
	}
	f, err := op.ForceUnlock(ctx, "q")
	if err != nil || f.Holder.Label != "stuck" {
		t.Fatalf("ForceUnlock: %+v, %v", f, err)
	}
	within(t, held.Done(), 600*time.Millisecond, "the old holder's loss")
	if _, err := op.ForceUnlock(ctx, "q"); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second ForceUnlock: %v, want ErrNotHeld", err)
	}
	_, unlockNew := locktest.MustLock(t, op, ctx, "q", lock.WithMaxWait(time.Second))
	_ = unlockNew()
}

// TestForceUnlockOwnHold: a Client that forces its own hold away ends it
// before ForceUnlock returns.
func TestForceUnlockOwnHold(t *testing.T) {
	_, rdb := locktest.Mini(t)
	c := locktest.NewClient(t, rdb)
	held, unlock := locktest.MustLock(t, c, context.Background(), "own")
	if _, err := c.ForceUnlock(context.Background(), "own"); err != nil {
		t.Fatal(err)
	}
	if context.Cause(held) != lock.ErrLost || lock.Held(held, "own") {
		t.Fatalf("after ForceUnlock: cause %v, held %v; want ErrLost at once", context.Cause(held), lock.Held(held, "own"))
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("unlock: %v, want ErrLost", err)
	}
}
