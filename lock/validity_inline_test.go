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

// TestHolderLosesKeyWhenLoneCallTakesThePool: a Client over a
// go-redis client with ContextTimeoutEnabled and a pool of one
// connection holds a key with a 600 ms lease; a lone Lock of another key
// goes inline and its command is held back 3 s on the pool's only
// connection (a slow network), so the watchdog's renewals wait for a
// connection and cannot get through. The holder's lock context must end
// with ErrLost before its lease ends, and the lone Lock return within its
// 1 s deadline + 100 ms.
func TestHolderLosesKeyWhenLoneCallTakesThePool(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	proxy := locktest.StartProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, PoolSize: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := locktest.NewClient(t, rdb)
	const lease = 600 * time.Millisecond
	held := "held-" + randKey()
	start := time.Now()
	lctx, unlock := locktest.MustLock(t, c, context.Background(), held, lock.WithLease(lease))
	defer func() { _ = unlock() }()
	other := "other-" + randKey()
	seen := proxy.HoldBackFirst("lockkit:{"+other+"}", 3*time.Second)
	const limit = time.Second
	done := make(chan time.Duration, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		took := timed(func() { _, _, _ = c.Lock(ctx, other) })
		done <- took
	}()
	locktest.Within(t, seen, time.Second, "the lone Lock's command on the wire")
	select {
	case <-lctx.Done():
		ended := time.Since(start)
		t.Logf("holder's context ended after %v: %v", ended, context.Cause(lctx))
		if !errors.Is(context.Cause(lctx), lock.ErrLost) {
			t.Errorf("holder's context ended with %v, want ErrLost", context.Cause(lctx))
		}
	case <-time.After(lease + locktest.Bound(slack)):
		t.Errorf("holder's context still live %v after Lock with a %v lease its renewals could not extend", time.Since(start), lease)
	}
	if took := <-done; took > limit+locktest.Bound(slack) {
		t.Errorf("the lone Lock took %v with a %v deadline", took, limit)
	}
}
