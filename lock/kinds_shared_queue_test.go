package lock_test

import (
	"context"
	"errors"
	"fmt"
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
// lock) whose commands reach Redis 600 ms late (a slow link), so for a
// moment after the holder's lease ran out the waiter is queued with no
// live holder. The key's hash, which says its kind, lives as long as the
// queue (share.lua keeps it so), and a caller of another limit is
// refused; the waiter never holds beside it.
func TestKindsKeptWhileWaitersQueue(t *testing.T) {
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
			key := "sh-kind-" + randKey()
			p := locktest.StartProxy(t, srv.Addr)
			wrdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
			t.Cleanup(func() { _ = wrdb.Close() })
			child := locktest.StartChild(t, sharedChildEnv(tc.holder, srv.Addr, key, 1, time.Second, 0), "held")
			w := locktest.NewClient(t, wrdb)
			type got struct {
				ctx context.Context
				err error
			}
			wch := make(chan got, 1)
			go func() {
				lctx, _, err := sharedCall(w, ctx, tc.waiter, key, lock.WithMaxWait(20*time.Second))
				wch <- got{lctx, err}
			}()
			waitQueued(t, rdb, key, 1)
			waitSubscribed(t, rdb, key, 1)
			p.SlowClients(600 * time.Millisecond)
			_ = child.Process.Kill()
			_ = child.Wait()
			base := "lockkit:{" + key + "}"
			locktest.Eventually(t, 5*time.Second, "the dead holder's lease over", func() bool {
				now, err := rdb.Time(ctx).Result()
				if err != nil {
					return false
				}
				for f, v := range rdb.HGetAll(ctx, base).Val() {
					var kind string
					var n, tok, end int64
					if _, err := fmt.Sscan(v, &kind, &n, &tok, &end); f[0] == '=' && err == nil && end >= now.UnixMilli() {
						return false
					}
				}
				return true
			})
			if n := queueLen(t, rdb, key); n != 1 {
				t.Fatalf("premise: %d waiters queued when the holder's lease ended, want 1", n)
			}
			if rdb.HGet(ctx, base, "k").Val() == "" {
				t.Fatal("the hash no longer says the key's kind while a waiter is queued")
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
