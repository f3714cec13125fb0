package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestForceUnlockFences: the old holder learns of the loss at its next
// renewal, its unlock reports it, the queued waiter gets the key with a
// larger token, and storage that checks tokens rejects the old holder.
func TestForceUnlockFences(t *testing.T) {
	t.Parallel()
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
	locktest.Within(t, held.Done(), lease, "the old holder's loss")
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
	t.Parallel()
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
	t.Parallel()
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

// TestForceUnlockOwnHold: a Client that forces its own hold away ends it
// before ForceUnlock returns.
func TestForceUnlockOwnHold(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
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

// TestForceUnlockFixedLeaseHolder: a hold with WithFixedLease has no
// watchdog, so it learns of a ForceUnlock only at its unlock (ErrLost) or
// when its lease ends, as ForceUnlock's doc says; meanwhile its fencing
// token, smaller than the next holder's, is what stops its writes.
func TestForceUnlockFixedLeaseHolder(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	held, unlock := locktest.MustLock(t, a, ctx, "fixed", lock.WithFixedLease(9*time.Second))
	old, _ := lock.FencingToken(held, "fixed")
	op := locktest.NewClient(t, srv.Client(t))
	if _, err := op.ForceUnlock(ctx, "fixed"); err != nil {
		t.Fatal(err)
	}
	next, unlockNext := locktest.MustLock(t, op, ctx, "fixed")
	defer unlockNext()
	if tok, _ := lock.FencingToken(next, "fixed"); tok <= old {
		t.Fatalf("next holder's token %d, old fixed-lease holder's %d", tok, old)
	}
	if held.Err() != nil {
		t.Fatalf("the fixed-lease hold ended before its unlock or lease end: %v", context.Cause(held))
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("unlock of the forced fixed-lease hold: %v, want ErrLost", err)
	}
	if info, err := op.Inspect(ctx, "fixed"); err != nil || !info.Held || info.Token <= old {
		t.Fatalf("after the old holder's unlock: %+v %v, want the next holder's", info, err)
	}
}

// TestForceUnlockToFrozenWaiterDoesNotStall: ForceUnlock hands the key
// over like a release, and tells every Client with a queued waiter, so
// when the waiter it handed the key to is in a frozen process (and no
// other Client's waiter is right behind it or last), a live waiter
// further back gets the key about one claim window later, not after the
// holder's whole lease.
func TestForceUnlockToFrozenWaiterDoesNotStall(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	name := "lockkit:{frozen}"
	// The holder and three waiters of a frozen process; a live waiter
	// queues after its first two.
	frozen := func(seq int) string { return "frozenprocess@h:1:" + strconv.Itoa(seq) }
	if err := rdb.HSet(ctx, name, "o", frozen(1), "n", 1, "t", 7, "q", 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, name, 20*time.Second)
	tm, _ := rdb.Time(ctx).Result()
	now := tm.UnixMilli()
	queue := func(o string) {
		rdb.RPush(ctx, name+":queue", o)
		rdb.HSet(ctx, name+":waits", o, now+21000, ">"+o, now)
		rdb.PExpire(ctx, name+":queue", 21*time.Second)
		rdb.PExpire(ctx, name+":waits", 21*time.Second)
	}
	queue(frozen(2))
	queue(frozen(3))
	live := locktest.NewClient(t, srv.Client(t))
	got := make(chan time.Time, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		_, unlock, err := live.Lock(lctx, "frozen")
		if err == nil {
			_ = unlock()
		}
		got <- time.Now()
	}()
	waitQueued(t, rdb, "frozen", 3)
	queue(frozen(4))

	op := locktest.NewClient(t, srv.Client(t))
	f, err := op.ForceUnlock(ctx, "frozen")
	if err != nil {
		t.Fatal(err)
	}
	forced := time.Now()
	if f.HandedTo.ID != frozen(2) {
		t.Fatalf("handed to %q", f.HandedTo.ID)
	}
	select {
	case at := <-got:
		if at.Sub(forced) > 3*time.Second {
			t.Fatalf("the live waiter got the key %v after ForceUnlock", at.Sub(forced))
		}
		t.Logf("the live waiter got the key %v after ForceUnlock", at.Sub(forced).Round(time.Millisecond))
	case <-time.After(3 * time.Second):
		t.Fatal("the live waiter still waits 3 s after ForceUnlock handed the key to a frozen waiter (claim window 1 s)")
	}
}

// TestQuorumForceUnlockStalledNodes: with one node of three stalled,
// ForceUnlock ends the hold on the two others and the holder loses the
// key at its next renewal; with two stalled it fails (the hold was ended
// on one node only), and does not claim a hold it could not end.
func TestQuorumForceUnlockStalledNodes(t *testing.T) {
	t.Parallel()
	for _, stalled := range []int{1, 2} {
		t.Run(strconv.Itoa(stalled), func(t *testing.T) {
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

// TestForceUnlockTokenAfterHashExpired: after a force-unlock with no
// waiter the hash keeps the last token about a second, then lapses; the
// next token (from Redis's clock) is still larger than the old holder's,
// also when the old one came from a long chain of hand-offs.
func TestForceUnlockTokenAfterHashExpired(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	var last uint64
	for range 50 { // a chain of holds within the linger: tokens +1 each
		held, unlock := locktest.MustLock(t, c, ctx, "chain")
		last, _ = lock.FencingToken(held, "chain")
		_ = unlock()
	}
	held, unlock := locktest.MustLock(t, c, ctx, "chain")
	defer unlock()
	old, _ := lock.FencingToken(held, "chain")
	if old != last+1 {
		t.Fatalf("chain: %d after %d", old, last)
	}
	if _, err := locktest.NewClient(t, rdb).ForceUnlock(ctx, "chain"); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 3*time.Second, "the forced hash lapsed", func() bool { return rdb.Exists(ctx, "lockkit:{chain}").Val() == 0 })
	next, unlockNext := locktest.MustLock(t, c, ctx, "chain")
	defer unlockNext()
	if tok, _ := lock.FencingToken(next, "chain"); tok <= old {
		t.Fatalf("token %d after the hash lapsed, old holder's %d", tok, old)
	}
}

// TestForceUnlockIfHeldBy: with IfHeldBy, ForceUnlock ends the hold of
// the owner named and no other: when another owner holds the key it
// returns ErrHolderChanged and changes nothing; an empty owner is
// refused.
func TestForceUnlockIfHeldBy(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, rdb, lock.WithOwnerLabel("a"))
	op := locktest.NewClient(t, rdb)
	_, unlockA := locktest.MustLock(t, a, ctx, "k")
	shown, err := op.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := unlockA(); err != nil {
		t.Fatal(err)
	}
	b := locktest.NewClient(t, rdb, lock.WithOwnerLabel("b"))
	heldB, unlockB := locktest.MustLock(t, b, ctx, "k", lock.WithLease(600*time.Millisecond))
	defer unlockB()
	before, _ := op.Inspect(ctx, "k")
	_, err = op.ForceUnlock(ctx, "k", lock.IfHeldBy(shown.Holder.ID))
	if !errors.Is(err, lock.ErrHolderChanged) || !strings.Contains(err.Error(), before.Holder.ID) {
		t.Fatalf("ForceUnlock of a's hold while b holds k: %v, want ErrHolderChanged naming b", err)
	}
	after, _ := op.Inspect(ctx, "k")
	if !after.Held || after.Holder != before.Holder || after.Token != before.Token || heldB.Err() != nil {
		t.Fatalf("b's hold changed: %+v -> %+v", before, after)
	}
	if _, err := op.ForceUnlock(ctx, "k", lock.IfHeldBy("")); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("IfHeldBy(\"\"): %v, want ErrInvalid", err)
	}
	f, err := op.ForceUnlock(ctx, "k", lock.IfHeldBy(before.Holder.ID))
	if err != nil || f.Holder.Label != "b" {
		t.Fatalf("ForceUnlock of b's hold: %+v %v", f, err)
	}
	locktest.Within(t, heldB.Done(), 3*time.Second, "b's loss")
}

// TestForceUnlockByDigestName: a key stored by its digest is listed by
// Held with its Name only; Inspect and ForceUnlock take that name.
func TestForceUnlockByDigestName(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb)
	key := "reports:" + strings.Repeat("x", 200)
	held, unlock := locktest.MustLock(t, c, ctx, key, lock.WithLease(600*time.Millisecond))
	defer unlock()
	var name string
	for info, err := range c.Held(ctx, "*") {
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != "" {
			t.Fatalf("Held listed %q, want the digest-stored key with Key empty", info.Key)
		}
		name = info.Name
	}
	info, err := c.Inspect(ctx, name)
	tok, _ := lock.FencingToken(held, key)
	if err != nil || !info.Held || info.Key != "" || info.Name != name || info.Token != tok {
		t.Fatalf("Inspect(%q): %+v %v, want the held lock with token %d", name, info, err, tok)
	}
	op := locktest.NewClient(t, rdb)
	if f, err := op.ForceUnlock(ctx, name); err != nil || f.Token != tok {
		t.Fatalf("ForceUnlock(%q): %+v %v", name, f, err)
	}
	locktest.Within(t, held.Done(), 3*time.Second, "the holder's loss")
	if _, err := op.ForceUnlock(ctx, "lockkit:{%h"+strings.Repeat("0", 64)+"}"); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("ForceUnlock of an unknown digest name: %v", err)
	}
}
