package lock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// ForceUnlock in quorum mode: ends the hold on the nodes that answer and
// names the majority holder.

func TestForceUnlockQuorum(t *testing.T) {
	t.Parallel()
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
	locktest.Within(t, held.Done(), 600*time.Millisecond, "the old holder's loss")
	if _, err := op.ForceUnlock(ctx, "q"); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second ForceUnlock: %v, want ErrNotHeld", err)
	}
	_, unlockNew := locktest.MustLock(t, op, ctx, "q", lock.WithMaxWait(time.Second))
	_ = unlockNew()
}

// TestQuorumForceUnlockStalledNodes: with one node of three stalled,
// ForceUnlock ends the hold on the two others and the holder loses the
// key at its next renewal; with two stalled it fails (the hold was ended
// on one node only), and does not claim a hold it could not end.
func TestQuorumForceUnlockStalledNodes(t *testing.T) {
	t.Parallel()
	for _, stalled := range []int{1, 2} {
		t.Run(strconv.Itoa(stalled), func(t *testing.T) {
			t.Parallel()
			srvs, clients := quorumOf(t, 3)
			ctx := context.Background()
			x := newQuorum(t, clients(), lock.WithDefaultLease(3*time.Second))
			held, unlock := locktest.MustLock(t, x, ctx, "q")
			defer unlock()
			op := newQuorum(t, clients(), lock.WithNodeTimeout(100*time.Millisecond))
			for _, s := range srvs[3-stalled:] {
				s.Pause()
			}
			fctx, cancel := context.WithTimeout(ctx, time.Second)
			start := time.Now()
			f, err := op.ForceUnlock(fctx, "q")
			took := time.Since(start)
			cancel()
			for _, s := range srvs[3-stalled:] {
				s.Resume()
			}
			switch {
			case took > time.Second+locktest.Bound(100*time.Millisecond):
				t.Fatalf("ForceUnlock took %v with a deadline of 1 s", took)
			case err != nil && stalled == 1:
				t.Fatalf("ForceUnlock with one node stalled: %v", err)
			case err != nil:
				return // refused without a majority: right
			}
			// ForceUnlock said the hold was ended: the holder must lose it.
			select {
			case <-held.Done():
				if !errors.Is(context.Cause(held), lock.ErrLost) {
					t.Fatalf("hold ended with %v", context.Cause(held))
				}
			case <-time.After(6 * time.Second): // two leases: several renewals
				info, _ := op.Inspect(ctx, "q")
				t.Fatalf("ForceUnlock reported %+v (nil error) with %d nodes of three stalled; the holder still holds the key 6 s later: %v", f, stalled, info.Holder)
			}
		})
	}
}

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
