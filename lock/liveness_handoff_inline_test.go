package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestHandOffByCutOffReleaseReachesLocalWaiter: a holder whose
// lock context has a 100 ms deadline unlocks while a waiter of the same
// Client is queued; the network holds the release back 400 ms, so Redis
// would run it after the unlock's deadline. A hand-off by a release of
// this Client reaches its waiter only through the release's reply
// (acquire.go), which go-redis abandons at the deadline when the release
// runs on the unlock's goroutine (ContextTimeoutEnabled). The waiter must
// still get the key within 250 ms of the unlock returning: the
// unconfirmed release goes to the janitor, whose own release (on another
// connection) hands the key over before the held-back one runs.
func TestHandOffByCutOffReleaseReachesLocalWaiter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  redis.Options
	}{{"default client", redis.Options{}}, {"ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, admin := newReal(t)
			proxy := locktest.StartProxy(t, srv.Addr)
			opt := tc.opt
			opt.Addr = proxy.Addr()
			rdb := redis.NewClient(&opt)
			t.Cleanup(func() { _ = rdb.Close() })
			c := locktest.NewClient(t, rdb, lock.WithDefaultLease(10*time.Second))
			key := "handoff-" + randKey()
			hctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, unlock := locktest.MustLock(t, c, hctx, key)
			got := make(chan time.Time, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				_, wunlock, err := c.Lock(ctx, key)
				got <- time.Now()
				if err != nil {
					t.Errorf("waiter: %v", err)
					return
				}
				_ = wunlock()
			}()
			waitQueued(t, admin, key, 1)
			seen := proxy.HoldBackFirst("lockkit:{"+key+"}", 400*time.Millisecond)
			err := unlock()
			unlocked := time.Now()
			t.Logf("unlock: %v", err)
			locktest.Within(t, seen, time.Second, "the held-back release")
			locktest.Eventually(t, 2*time.Second, "Redis running the release", func() bool {
				return !proxy.HeldBackUntil().IsZero()
			})
			ran := proxy.HeldBackUntil()
			at := <-got
			t.Logf("waiter got the key %v after the unlock returned, %v after Redis ran the held-back release", at.Sub(unlocked), at.Sub(ran))
			if d := at.Sub(unlocked); d > locktest.Bound(250*time.Millisecond) {
				t.Errorf("waiter got the key %v after the unlock returned, want within 250 ms", d)
			}
		})
	}
}
