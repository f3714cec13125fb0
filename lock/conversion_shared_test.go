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

// Guarantee (issue 33, the brief's conversion rule): a held plain Lock
// whose key a reader asks for becomes the writer of a read-write lock: it
// keeps its lock past several leases (renewed through share.lua's field),
// no reader gets in while it holds, its unlock succeeds, and the Lock
// waiter queued before the conversion becomes a writer that gets the key
// next, keeps it past the claim window, and excludes the reader too.
func TestConversionHeldLockBecomesWriter(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "sh-conv-" + randKey()
	const lease = 600 * time.Millisecond
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	c := locktest.NewClient(t, srv.Client(t))
	actx, aunlock := locktest.MustLock(t, a, ctx, key, lock.WithLease(lease))
	bdone, bres := lockAsync(b, ctx, key, lock.WithLease(lease), lock.WithMaxWait(30*time.Second))
	waitQueued(t, rdb, key, 1)
	cdone := make(chan struct{})
	var cerr error
	var cat time.Time
	var cunlock lock.UnlockFunc
	go func() {
		defer close(cdone)
		_, cunlock, cerr = c.RLock(ctx, key, lock.WithLease(lease), lock.WithMaxWait(30*time.Second))
		cat = time.Now()
	}()
	waitQueued(t, rdb, key, 2)
	time.Sleep(4 * lease)
	if actx.Err() != nil {
		t.Fatalf("the Lock holder lost its lock once a reader queued: %v", context.Cause(actx))
	}
	if _, _, err := a.TryRLock(ctx, key); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("TryRLock while the converted Lock holds: %v, want ErrNotObtained", err)
	}
	select {
	case <-cdone:
		t.Fatalf("reader got in while the Lock held (err %v)", cerr)
	default:
	}
	if err := aunlock(); err != nil {
		t.Fatalf("the converted Lock holder's unlock: %v", err)
	}
	locktest.Within(t, bdone, locktest.Bound(5*time.Second), "the Lock waiter queued before the conversion")
	if bres.err != nil {
		t.Fatalf("the Lock waiter: %v", bres.err)
	}
	time.Sleep(claimWindowShared + 4*lease) // past the claim window: its confirmation went through
	if bres.ctx.Err() != nil {
		t.Fatalf("the Lock waiter handed the writer's hold lost it: %v", context.Cause(bres.ctx))
	}
	select {
	case <-cdone:
		t.Fatalf("reader got in while the writer (the Lock waiter) held (err %v)", cerr)
	default:
	}
	bunlocked := time.Now()
	if err := bres.unlock(); err != nil {
		t.Fatalf("the writer's unlock: %v", err)
	}
	locktest.Within(t, cdone, locktest.Bound(5*time.Second), "the reader after the writers")
	if cerr != nil {
		t.Fatalf("reader: %v", cerr)
	}
	if cat.Before(bunlocked) {
		t.Errorf("reader got in at %v, before the writer's unlock at %v", cat, bunlocked)
	}
	_ = cunlock()
}

// claimWindowShared is the claim window (lock.claimWindow).
const claimWindowShared = time.Second

// Guarantee: a Lock waiter handed the lock (by a plain Lock's release)
// whose key a reader then makes a read-write lock, before the waiter
// confirmed, keeps the lock: its context stays live past the claim window,
// no reader gets in while it holds, and its unlock succeeds. The waiter's
// pub/sub reaches it through a proxy 300 ms late, so the reader comes
// first.
func TestConversionHandedLockWaiterKeepsLock(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	p := locktest.StartProxy(t, srv.Addr)
	p.SlowPubSub(300*time.Millisecond, 300*time.Millisecond)
	brdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = brdb.Close() })
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, brdb)
	c := locktest.NewClient(t, srv.Client(t))
	for i := range 4 {
		key := "sh-handconv-" + randKey()
		_, aunlock := locktest.MustLock(t, a, ctx, key)
		bdone, bres := lockAsync(b, ctx, key, lock.WithMaxWait(30*time.Second))
		waitQueued(t, rdb, key, 1)
		waitSubscribed(t, rdb, key, 1)
		if err := aunlock(); err != nil { // hands the lock to b
			t.Fatal(err)
		}
		cdone := make(chan struct{})
		var cerr error
		var cunlock lock.UnlockFunc
		go func() { // the reader comes before b hears of the hand-off
			defer close(cdone)
			_, cunlock, cerr = c.RLock(ctx, key, lock.WithMaxWait(30*time.Second))
		}()
		// The reader's call makes the key a read-write lock's and queues
		// the reader; b, handed the lock and not confirmed, leaves the
		// queue then as the writer.
		locktest.Eventually(t, 5*time.Second, "the reader queued on a read-write lock", func() bool {
			return rdb.HGet(ctx, "lockkit:{"+key+"}", "k").Val() == "rw" && queueLen(t, rdb, key) == 1
		})
		locktest.Within(t, bdone, locktest.Bound(5*time.Second), "the Lock waiter")
		if bres.err != nil {
			t.Fatalf("round %d: the Lock waiter: %v", i, bres.err)
		}
		time.Sleep(claimWindowShared + 500*time.Millisecond)
		if bres.ctx.Err() != nil {
			t.Fatalf("round %d: the handed Lock waiter lost the lock once the key turned read-write: %v", i, context.Cause(bres.ctx))
		}
		select {
		case <-cdone:
			t.Fatalf("round %d: reader got in while the handed Lock waiter held (err %v)", i, cerr)
		default:
		}
		if err := bres.unlock(); err != nil {
			t.Fatalf("round %d: the handed Lock waiter's unlock: %v", i, err)
		}
		locktest.Within(t, cdone, locktest.Bound(5*time.Second), "the reader")
		if cerr != nil {
			t.Fatalf("round %d: reader: %v", i, cerr)
		}
		_ = cunlock()
	}
}
