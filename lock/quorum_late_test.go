package lock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestQuorumLateGrantIsReleased: in quorum mode Lock returns at the
// majority's answer while the last node's command may still be on its
// way. The unlock right after reaches that node first (on another
// connection), or is not sent there at all when the majority answers
// before it is on the wire; the node then gives the key to an owner that
// already let go. It must not keep it for a whole lease: with two such
// nodes no one could get a majority until the leases end.
func TestQuorumLateGrantIsReleased(t *testing.T) {
	t.Parallel() // its own servers
	srvs, clients := quorumOf(t, 3)
	ctx := context.Background()
	// The scripts cached on every node: a command that finds a script
	// missing after Lock returned is not sent again, and nothing would be
	// late.
	for _, s := range srvs {
		warmScripts(t, s)
	}
	direct := srvs[2].Client(t)
	for try := range 5 {
		key := "late" + strconv.Itoa(try)
		hashKey := "lockkit:{" + key + "}"
		proxy := locktest.StartProxy(t, srvs[2].Addr)
		seen := proxy.HoldBackFirst(hashKey, 200*time.Millisecond)
		rdbs := clients()
		slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MinIdleConns: 2})
		t.Cleanup(func() { _ = slow.Close() })
		// No dial between Lock's return and its command.
		locktest.Eventually(t, 5*time.Second, "two idle connections to the slow node", func() bool { return slow.PoolStats().IdleConns >= 2 })
		rdbs[2] = slow
		// A node timeout far above the hold-back, so that the slow node's
		// late answer is read even on a slow machine.
		c := newQuorum(t, rdbs, lock.WithNodeTimeout(2*time.Second))
		_, unlock := locktest.MustLock(t, c, ctx, key)
		if !locktest.ClosedWithin(seen, time.Second) {
			// The majority answered before the slow node's command was
			// on the wire: it was not sent. Try again.
			_ = unlock()
			continue
		}
		unlocking := time.Now()
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		waitReleasedOn(t, direct, hashKey, 3*time.Second)
		if held := proxy.HeldBackUntil(); held.After(unlocking) {
			return // the slow node gave the key after the unlock began
		}
	}
	t.Fatal("in 5 tries the slow node never gave the key after the unlock began: the test did not make what it checks")
}

// warmScripts has srv cache the lock's scripts, so that a Client's first
// command there is the script itself, not a NOSCRIPT and its retry.
func warmScripts(t *testing.T, srv *redistest.Server) {
	t.Helper()
	single, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	_, unlock := locktest.MustLock(t, single, context.Background(), "warm")
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}

// waitReleasedOn waits up to limit for the lock hash hashKey on a node to
// have a hold count of 0: its owner released what the node gave it (the
// hash stays 1 s after a release). A count above 0 would stay for the
// whole lease, for an owner that let go.
func waitReleasedOn(t *testing.T, node redis.Cmdable, hashKey string, limit time.Duration) {
	t.Helper()
	locktest.Eventually(t, limit, "after the unlock, every node free of the key (hold count 0) for an owner that let go", func() bool {
		n, err := node.HGet(context.Background(), hashKey, "n").Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return n == "0"
	})
}
