package lock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Locks work through Redis Sentinel with go-redis's failover client: a
// primary, its replica and a Sentinel, and a failover while a lock is
// held. After it the Client talks to the new primary: the holder keeps its
// lock (the replica had it: a failover Sentinel asks for waits for the
// replica to catch up), another owner is refused, and the unlock frees the
// key for it. A crash of the primary can lose a lock not yet replicated:
// see docs/guarantees.md.
func TestSentinelFailover(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	ctx := context.Background()
	sentinel := redistest.StartSentinel(t, "locks", primary, 500*time.Millisecond)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	defer sc.Close()
	locktest.Eventually(t, 10*time.Second, "Sentinel sees the replica up and linked", func() bool {
		replicas, err := sc.Replicas(ctx, "locks").Result()
		return err == nil && len(replicas) == 1 &&
			replicas[0]["flags"] == "slave" && replicas[0]["master-link-status"] == "ok"
	})

	newClient := func() *lock.Client {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "locks", SentinelAddrs: []string{sentinel.Addr}})
		t.Cleanup(func() { _ = rdb.Close() })
		return locktest.NewClient(t, rdb, lock.WithDefaultLease(3*time.Second))
	}
	holder, other := newClient(), newClient()
	held, unlock := locktest.MustLock(t, holder, ctx, "pay")
	locktest.Eventually(t, 10*time.Second, "the lock on the replica", func() bool {
		return locktest.Held(t, replica.Client(t), "lockkit:{pay}")
	})
	redistest.Failover(t, sentinel.Addr, "locks")
	locktest.Eventually(t, 15*time.Second, "failover to the replica", func() bool {
		addr, err := sc.GetMasterAddrByName(ctx, "locks").Result()
		return err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(replica.Port)
	})
	// Renewals (every second) now reach the new primary.
	locktest.Eventually(t, 10*time.Second, "the lock on the new primary", func() bool {
		return locktest.Held(t, replica.Client(t), "lockkit:{pay}")
	})
	time.Sleep(2 * time.Second) // two renewals on the new primary
	if err := held.Err(); err != nil {
		t.Fatalf("holder lost its lock in a failover Sentinel asked for: %v", context.Cause(held))
	}
	if _, _, err := other.TryLock(ctx, "pay"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("another owner's TryLock after the failover = %v, want ErrNotObtained", err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock after the failover: %v", err)
	}
	_, unlockOther := locktest.MustLock(t, other, ctx, "pay", lock.WithMaxWait(5*time.Second))
	if err := unlockOther(); err != nil {
		t.Fatal(err)
	}
}
