package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// ForceUnlock of semaphores and read-write locks: every holder's hold, or
// the one IfHeldBy names, ends as a forced lock's does.

// mustShared fails the test unless acquire's hold was taken, and returns
// its context, unlock and token.
func mustShared(t *testing.T, key string) func(context.Context, lock.UnlockFunc, error) (context.Context, lock.UnlockFunc, uint64) {
	return func(ctx context.Context, unlock lock.UnlockFunc, err error) (context.Context, lock.UnlockFunc, uint64) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := lock.FencingToken(ctx, key)
		return ctx, unlock, tok
	}
}

// waitLost waits until ctx ends with cause ErrLost (the watchdog's
// renewal found the hold gone: within a third of a 1 s lease).
func waitLost(t *testing.T, what string, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
		if cause := context.Cause(ctx); !errors.Is(cause, lock.ErrLost) {
			t.Fatalf("%s ended with %v, want ErrLost", what, cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still on 5 s after the force", what)
	}
}

func TestForceUnlockSemaphoreEndsEveryPermitAndHandsThemOn(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	key := "sem-" + randKey()
	must := mustShared(t, key)
	old := locktest.NewClient(t, rdb, lock.WithOwnerLabel("old"))
	lease := lock.WithLease(time.Second)
	actx, unlockA, tokA := must(old.Acquire(ctx, key, 2, lease))
	bctx, unlockB, tokB := must(old.Acquire(ctx, key, 2, lease))
	w := locktest.NewClient(t, rdb, lock.WithOwnerLabel("w"))
	wdone, wres := async(func() (context.Context, lock.UnlockFunc, error) {
		ctx := context.Background()
		return w.Acquire(ctx, key, 2)
	})
	waitQueued(t, rdb, key, 1)

	op := locktest.NewClient(t, rdb, lock.WithOwnerLabel("operator"))
	f, err := op.ForceUnlock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Permits) != 2 || f.Permits[0].Token != tokA || f.Permits[1].Token != tokB ||
		f.Holder != f.Permits[0].Owner || f.Token != tokA || f.HandedTo.ID != "" {
		t.Fatalf("%+v: want both permits ended, tokens %d then %d", f, tokA, tokB)
	}
	waitLost(t, "a's permit", actx)
	waitLost(t, "b's permit", bctx)
	if err := unlockA(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("a's unlock: %v, want ErrLost", err)
	}
	if err := unlockB(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("b's unlock: %v, want ErrLost", err)
	}
	acquired(t, wdone, wres, "w's permit")
	if tok, _ := lock.FencingToken(wres.ctx, key); tok <= tokB {
		t.Fatalf("w's token %d, want more than %d", tok, tokB)
	}
	info, err := op.Inspect(ctx, key)
	if err != nil || info.Holding != 1 || info.Permits[0].Owner.Label != "w" || info.Waiting != 0 {
		t.Fatalf("after the force: %+v, %v: want w alone", info, err)
	}
}

func TestForceUnlockIfHeldByEndsOneReaderOnly(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	key := "rw-" + randKey()
	must := mustShared(t, key)
	r1 := locktest.NewClient(t, rdb, lock.WithOwnerLabel("r1"))
	r2 := locktest.NewClient(t, rdb, lock.WithOwnerLabel("r2"))
	ctx1, unlock1, tok1 := must(r1.RLock(ctx, key))
	ctx2, unlock2, _ := must(r2.RLock(ctx, key))
	defer unlock2()
	op := locktest.NewClient(t, rdb, lock.WithOwnerLabel("operator"))
	before, err := op.Inspect(ctx, key)
	if err != nil || before.Holding != 2 {
		t.Fatalf("before: %+v, %v", before, err)
	}
	id1 := before.Permits[0].Owner.ID

	if _, err := op.ForceUnlock(ctx, key, lock.IfHeldBy(id1+"x")); !errors.Is(err, lock.ErrHolderChanged) {
		t.Fatalf("IfHeldBy of no holder: %v, want ErrHolderChanged", err)
	}
	if info, _ := op.Inspect(ctx, key); info.Holding != 2 || info.Forced {
		t.Fatalf("after a refused force: %+v, want both readers", info)
	}

	f, err := op.ForceUnlock(ctx, key, lock.IfHeldBy(id1))
	if err != nil || len(f.Permits) != 1 || f.Holder.ID != id1 || f.Token != tok1 || f.Permits[0].Write {
		t.Fatalf("ForceUnlock of r1: %+v, %v", f, err)
	}
	info, err := op.Inspect(ctx, key)
	if err != nil || info.Holding != 1 || info.Permits[0].Owner.Label != "r2" || !info.Forced || info.LastReleasedBy.Label != "operator" {
		t.Fatalf("after the force: %+v, %v: want r2 alone, forced by operator", info, err)
	}
	if err := unlock1(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("r1's unlock: %v, want ErrLost", err)
	}
	if ctx1.Err() == nil || ctx2.Err() != nil {
		t.Fatalf("r1's context %v, r2's %v: want r1's ended alone", ctx1.Err(), ctx2.Err())
	}
}

// TestForceUnlockOwnWriterLetsQueuedReadersInTogether: a Client that forces
// its own write hold ends it before ForceUnlock returns, and the readers
// queued behind it all go in.
func TestForceUnlockOwnWriterLetsQueuedReadersInTogether(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	key := "rw-" + randKey()
	must := mustShared(t, key)
	c := locktest.NewClient(t, rdb, lock.WithOwnerLabel("writer"))
	_, unlockR, _ := must(c.RLock(ctx, key)) // makes key a read-write lock
	wdone, wres := async(func() (context.Context, lock.UnlockFunc, error) {
		ctx := context.Background()
		return c.Lock(ctx, key)
	})
	waitQueued(t, rdb, key, 1)
	_ = unlockR()
	acquired(t, wdone, wres, "the write lock")
	wtok, _ := lock.FencingToken(wres.ctx, key)
	var readers []*lockResult
	var dones []<-chan struct{}
	for i := range 2 {
		r := locktest.NewClient(t, rdb)
		done, res := async(func() (context.Context, lock.UnlockFunc, error) {
			ctx := context.Background()
			return r.RLock(ctx, key)
		})
		waitQueued(t, rdb, key, int64(i+1))
		readers, dones = append(readers, res), append(dones, done)
	}

	f, err := c.ForceUnlock(ctx, key)
	if err != nil || len(f.Permits) != 1 || !f.Permits[0].Write || f.Token != wtok {
		t.Fatalf("ForceUnlock: %+v, %v: want the write hold, token %d", f, err, wtok)
	}
	if cause := context.Cause(wres.ctx); !errors.Is(cause, lock.ErrLost) {
		t.Fatalf("the writer's context on ForceUnlock's return: %v, want ErrLost", cause)
	}
	for i, res := range readers {
		acquired(t, dones[i], res, "a queued reader")
		if tok, _ := lock.FencingToken(res.ctx, key); tok <= wtok {
			t.Fatalf("reader's token %d, want more than %d", tok, wtok)
		}
	}
	info, err := c.Inspect(ctx, key)
	if err != nil || info.Holding != 2 || info.Holder.ID != "" {
		t.Fatalf("after the force: %+v, %v: want two readers", info, err)
	}
}

func TestForceUnlockRefusesSharedKeyWithoutHolders(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	key := "sem-" + randKey()
	c := locktest.NewClient(t, rdb)
	_, unlock, _ := mustShared(t, key)(c.Acquire(ctx, key, 3))
	_ = unlock() // the hash lingers a moment, with no holder
	before, _ := rdb.HGetAll(ctx, "lockkit:{"+key+"}").Result()
	if _, err := c.ForceUnlock(ctx, key); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("ForceUnlock of a free semaphore: %v, want ErrNotHeld", err)
	}
	if after, _ := rdb.HGetAll(ctx, "lockkit:{"+key+"}").Result(); len(after) != len(before) || after["r"] != before["r"] {
		t.Fatalf("the hash changed: %v -> %v", before, after)
	}
}

// TestForceUnlockSharedWaitsForReplicaAck: with WithReplicaAck the forced
// releases are on the replica when ForceUnlock returns; a stalled replica
// makes it fail with ErrReplicaAck.
func TestForceUnlockSharedWaitsForReplicaAck(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	ctx := context.Background()
	c := locktest.NewClient(t, primary.Client(t), lock.WithReplicaAck(1, 200*time.Millisecond))
	must := mustShared(t, "s")
	_, unlock, _ := must(c.Acquire(ctx, "s", 2))
	defer unlock()
	if _, err := c.ForceUnlock(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if n, err := replica.Client(t).HLen(ctx, "lockkit:{s}").Result(); err != nil || n != 3 { // k, t, r: no holder
		t.Fatalf("replica's hash: %d fields, %v; want k, t and r", n, err)
	}
	_, unlock2, _ := must(c.Acquire(ctx, "s", 2))
	defer unlock2()
	replica.Pause()
	defer replica.Resume()
	if _, err := c.ForceUnlock(ctx, "s"); !errors.Is(err, lock.ErrReplicaAck) {
		t.Fatalf("ForceUnlock with a stalled replica: %v, want ErrReplicaAck", err)
	}
}

// TestForceUnlockSharedOnCluster: on Redis Cluster, Inspect and List read
// a semaphore's permits from its key's master, and ForceUnlock's MULTI
// runs there, handing the permit to the waiter.
func TestForceUnlockSharedOnCluster(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb, lock.WithOwnerLabel("old"))
	keys := spreadKeys(t, rdb, 3, 1)
	for _, k := range keys {
		_, unlock, err := c.Acquire(ctx, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
	}
	listed := 0
	for info, err := range c.List(ctx, "*") {
		if err != nil {
			t.Fatal(err)
		}
		if info.Kind != lock.KindSemaphore || info.Holding != 1 || info.Node == "" {
			t.Fatalf("listed %+v: want a semaphore's permit, with its master", info)
		}
		listed++
	}
	if listed != len(keys) {
		t.Fatalf("listed %d semaphores, want %d", listed, len(keys))
	}
	w := locktest.NewClient(t, rdb, lock.WithOwnerLabel("w"))
	wdone, wres := async(func() (context.Context, lock.UnlockFunc, error) {
		ctx := context.Background()
		return w.Acquire(ctx, keys[0], 1)
	})
	locktest.Eventually(t, 5*time.Second, "the waiter queued", func() bool {
		return rdb.LLen(ctx, "lockkit:{"+keys[0]+"}:queue").Val() == 1
	})
	f, err := c.ForceUnlock(ctx, keys[0])
	if err != nil || len(f.Permits) != 1 || f.Holder.Label != "old" {
		t.Fatalf("ForceUnlock on the cluster: %+v, %v", f, err)
	}
	acquired(t, wdone, wres, "the waiter's permit")
	info, err := c.Inspect(ctx, keys[0])
	if err != nil || info.Holding != 1 || info.Permits[0].Owner.Label != "w" || !info.Forced {
		t.Fatalf("after the force: %+v, %v: want w holding", info, err)
	}
}
