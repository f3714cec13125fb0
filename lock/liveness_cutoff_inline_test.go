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

// TestLoneAcquireRunAfterItsDeadlineLeavesNoOrphan: a lone Lock
// and TryLock on a go-redis client with ContextTimeoutEnabled, whose
// command the network holds back 400 ms, past the call's 100 ms deadline:
// go-redis gives up at the deadline on the caller's goroutine, and Redis
// runs the acquisition later for an owner nobody holds. The key, with a
// 10 s lease, must be obtainable by another Client within a claim window
// (1 s) of Redis running the command, as TestCloseDuringAcquireLeavesNoOrphan
// requires after Close.
func TestLoneAcquireRunAfterItsDeadlineLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		try     bool
		retries int
	}{{"Lock, no retries", false, -1}, {"TryLock, no retries", true, -1}, {"Lock, default retries", false, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, admin := newReal(t)
			proxy := locktest.StartProxy(t, srv.Addr)
			rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: tc.retries})
			t.Cleanup(func() { _ = rdb.Close() })
			c := locktest.NewClient(t, rdb, lock.WithDefaultLease(10*time.Second))
			if _, unlock, err := c.Lock(context.Background(), "warm-"+randKey()); err != nil { // loads the scripts
				t.Fatal(err)
			} else if err := unlock(); err != nil {
				t.Fatal(err)
			}
			key := "late-" + randKey()
			seen := proxy.HoldBackFirst("lockkit:{"+key+"}", 400*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			var err error
			if tc.try {
				_, _, err = c.TryLock(ctx, key)
			} else {
				_, _, err = c.Lock(ctx, key)
			}
			cancel()
			locktest.Within(t, seen, time.Second, "the held-back acquisition")
			if !errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("cut-off call = %v, want ErrNotObtained", err)
			}
			other := locktest.NewClient(t, admin)
			locktest.Eventually(t, 2*time.Second, "Redis running the held-back acquisition", func() bool {
				return !proxy.HeldBackUntil().IsZero()
			})
			ran := proxy.HeldBackUntil()
			d := obtainableAfter(other, key, 5*time.Second)
			after := time.Since(ran)
			t.Logf("key obtainable %v after the call (-1: not within 5 s), %v after Redis ran the acquisition", d, after)
			if d < 0 || after > time.Second+locktest.Bound(500*time.Millisecond) {
				t.Errorf("key taken by a cut-off %s stays blocked (%v after Redis ran it); want free within a claim window", tc.name, after)
			}
		})
	}
}
