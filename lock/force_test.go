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

// ForceUnlock: ends a hold from outside, conditionally (IfHeldBy) or not,
// and hands the key on without stalling the waiters.

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
	for info, err := range c.List(ctx, "*") {
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
