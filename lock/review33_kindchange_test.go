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

// Guarantee (Acquire's doc, issue 33 "Limits"): while a key has holders
// or waiters, a call with another limit (or of another kind) returns
// ErrInvalid naming both and changes nothing, "never a silent mix". Here
// the key's only holder (a child process, lease 1 s) is SIGKILLed while a
// live waiter is queued (a semaphore of 1, or a writer of a read-write
// lock); its commands reach Redis 600 ms late (a slow link), so for a
// moment after the holder's lease ran out the key's hash is gone while
// the waiter is still queued. A caller of another limit (or kind) then
// must be refused, and the waiter must never hold beside it.
//
// Observed (go test -count=1 -run TestReview33KindKeptWhileWaitersQueue
// ./lock): the newcomer with limit 2 is not refused; share.lua finds no
// hash (meta.k nil), so it takes the key as a semaphore of 2, hands the
// queued waiter a permit of it, and takes the second permit itself: the
// waiter of a semaphore of 1 (or the writer) holds beside the newcomer.
// The kind check reads only the hash (k), not the live queue. Redis
// afterwards: k=s2 and two fields "p 1 <token> <end>", the writer's too.
func TestReview33KindKeptWhileWaitersQueue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, holder, waiter string
	}{
		{"semaphore of 1", "hold-p", "p"},
		{"read-write lock", "hold-r", "w"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "r33-kind-" + randKey()
			p := locktest.StartProxy(t, srv.Addr)
			wrdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
			t.Cleanup(func() { _ = wrdb.Close() })
			child := locktest.StartChild(t, r33Env(tc.holder, srv.Addr, key, 1, time.Second, 0), "held")
			w := locktest.NewClient(t, wrdb)
			type got struct {
				ctx context.Context
				err error
			}
			wch := make(chan got, 1)
			go func() {
				lctx, _, err := r33Call(w, ctx, tc.waiter, key, lock.WithMaxWait(20*time.Second))
				wch <- got{lctx, err}
			}()
			waitQueued(t, rdb, key, 1)
			waitSubscribed(t, rdb, key, 1)
			p.SlowClients(600 * time.Millisecond)
			_ = child.Process.Kill()
			_ = child.Wait()
			base := "lockkit:{" + key + "}"
			locktest.Eventually(t, 5*time.Second, "the dead holder's hash gone", func() bool {
				return rdb.Exists(ctx, base).Val() == 0
			})
			if n := queueLen(t, rdb, key); n != 1 {
				t.Fatalf("premise: %d waiters queued when the hash went, want 1", n)
			}
			n := locktest.NewClient(t, srv.Client(t))
			nctx, nunlock, err := n.Acquire(ctx, key, 2, lock.WithMaxWait(3*time.Second))
			t.Logf("the newcomer with limit 2: %v", err)
			if err == nil {
				defer nunlock()
			}
			var g got
			select {
			case g = <-wch:
			case <-time.After(locktest.Bound(5 * time.Second)):
			}
			t.Logf("the waiter: %v", g.err)
			if !errors.Is(err, lock.ErrInvalid) {
				t.Errorf("a newcomer with limit 2 while a %s waiter was queued: %v, want ErrInvalid", tc.name, err)
			}
			if err == nil && g.ctx != nil && g.err == nil && g.ctx.Err() == nil && nctx.Err() == nil {
				t.Errorf("the %s waiter and the newcomer with limit 2 hold the key together", tc.name)
			}
		})
	}
}
