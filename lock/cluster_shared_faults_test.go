package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (issue 33, "Redis Cluster (one hash tag per key)"): on a
// 3-master cluster, with keys on every master, a semaphore of 2 admits
// two holders and no third, a writer waits for the reader, and a release
// wakes the waiter by its sharded message (its holders' leases are 30 s:
// polling would not do it in time); a reader converting a held Lock works
// there too.
func TestClusterSharedHoldsUnderStalls(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	keys := spreadKeys(t, cl.Client(t), 3, 1)
	a := locktest.NewClient(t, cl.Client(t))
	b := locktest.NewClient(t, cl.Client(t))
	ctx := context.Background()
	for _, k := range keys {
		sem, rw, conv := "s"+k, "rw"+k, "c"+k
		var unlocks []lock.UnlockFunc
		for range 2 {
			_, u, err := a.Acquire(ctx, sem, 2)
			if err != nil {
				t.Fatal(err)
			}
			unlocks = append(unlocks, u)
		}
		if _, _, err := b.TryAcquire(ctx, sem, 2); err == nil {
			t.Fatalf("%s: a third permit of 2", sem)
		}
		_, ru, err := a.RLock(ctx, rw)
		if err != nil {
			t.Fatal(err)
		}
		_, cu := locktest.MustLock(t, a, ctx, conv)
		type got struct {
			at  time.Time
			err error
			u   lock.UnlockFunc
		}
		wait := func(f func() (context.Context, lock.UnlockFunc, error)) chan got {
			ch := make(chan got, 1)
			go func() {
				_, u, err := f()
				ch <- got{time.Now(), err, u}
			}()
			return ch
		}
		sw := wait(func() (context.Context, lock.UnlockFunc, error) { return b.Acquire(ctx, sem, 2) })
		ww := wait(func() (context.Context, lock.UnlockFunc, error) { return b.Lock(ctx, rw) })
		cw := wait(func() (context.Context, lock.UnlockFunc, error) { return b.RLock(ctx, conv) })
		for _, key := range []string{sem, rw, conv} {
			waitShardSubscribed(t, cl, "lockkit:{"+key+"}:released:*")
		}
		time.Sleep(100 * time.Millisecond) // every waiter queued
		for _, c := range []struct {
			name   string
			unlock lock.UnlockFunc
			ch     chan got
		}{{sem, unlocks[0], sw}, {rw, ru, ww}, {conv, cu, cw}} {
			select {
			case g := <-c.ch:
				t.Fatalf("%s: the waiter got in before the release (err %v)", c.name, g.err)
			default:
			}
			if err := c.unlock(); err != nil {
				t.Fatalf("%s: unlock: %v", c.name, err)
			}
			released := time.Now()
			select {
			case g := <-c.ch:
				if g.err != nil {
					t.Fatalf("%s: waiter: %v", c.name, g.err)
				}
				_ = g.u()
				if d := g.at.Sub(released); d > locktest.Bound(500*time.Millisecond) {
					t.Errorf("%s: the waiter got in %v after the release", c.name, d)
				}
			case <-time.After(locktest.Bound(5 * time.Second)):
				t.Fatalf("%s: the waiter not in within %v of the release", c.name, locktest.Bound(5*time.Second))
			}
		}
		_ = unlocks[1]()
	}
}
