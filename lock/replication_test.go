package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Replication: WithReplicaAck and Sentinel failovers.

// A primary crashes and its replica is promoted. With WithReplicaAck a
// lock exists only once the replica confirmed it: while the replica does
// not answer, an acquisition fails (ErrReplicaAck) instead of taking a
// lock the replica lacks, and a lock it confirmed is still held on the
// promoted replica, so another owner is refused. Without it, a lock the
// primary alone had is gone after the failover and another owner takes
// the key while the first holder's context is live: the hole the option
// closes.
func TestReplicaAckAcrossFailover(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	ctx := context.Background()
	acked := locktest.NewClient(t, primary.Client(t), lock.WithReplicaAck(1, 200*time.Millisecond), lock.WithDefaultLease(2*time.Second))
	plain := locktest.NewClient(t, primary.Client(t))

	kept, unlockKept := locktest.MustLock(t, acked, ctx, "kept")
	defer unlockKept()
	time.Sleep(1500 * time.Millisecond) // renewals, confirmed by the replica
	if kept.Err() != nil {
		t.Fatalf("lock lost while its replica confirmed renewals: %v", context.Cause(kept))
	}
	// The replica stops replicating here: it has every write before this
	// and none after, like a replica lagging when its primary crashes. It
	// is promoted at once; the Clients go on writing to the old primary.
	promoted := replica.Client(t)
	if err := promoted.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatalf("promote the replica: %v", err)
	}
	start := time.Now()
	if _, _, err := acked.Lock(ctx, "unconfirmed", lock.WithMaxWait(2*time.Second)); !errors.Is(err, lock.ErrReplicaAck) {
		t.Fatalf("Lock with no replica to confirm = %v, want ErrReplicaAck", err)
	}
	t.Logf("unconfirmed acquisition failed after %v", time.Since(start))
	hole, unlockHole := locktest.MustLock(t, plain, ctx, "hole")
	defer unlockHole()
	primary.Stop() // the crash: the Clients now reach the promoted replica

	other := locktest.NewClient(t, redis.NewClient(&redis.Options{Addr: replica.Addr}))
	if _, _, err := other.TryLock(ctx, "kept"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock of the acknowledged lock after the failover = %v, want ErrNotObtained (kept's holder live: %v)", err, kept.Err() == nil)
	}
	// Its holder, whose renewals no replica confirms any more, learns of
	// the loss within its 2 s lease.
	locktest.Within(t, kept.Done(), 3*time.Second, "loss of the lock whose renewals are unconfirmed")
	if cause := context.Cause(kept); !errors.Is(cause, lock.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	_, unlockOther, err := other.TryLock(ctx, "hole")
	if err != nil {
		t.Fatalf("TryLock of the unacknowledged lock after the failover = %v: want the hole shown, the replica never had it", err)
	}
	defer unlockOther()
	if hole.Err() != nil {
		t.Fatalf("the first holder of the unacknowledged lock was told already: %v", context.Cause(hole))
	}
	t.Log("without WithReplicaAck, a second owner took a lock whose first holder's context was live")
}

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

// With WithReplicaAck, a release whose WAIT times out (the replica stalls)
// still ran on the primary and handed the key to the next waiter, here one
// of the releasing Client itself, which no message tells: the release's
// reply, though failed with ErrReplicaAck, still wakes it. Its Lock returns
// soon (with the key, or ErrReplicaAck while the replica stalls), not when
// the old holder's lease would have ended.
func TestReplicaAckSelfHandOffAfterReplicaStall(t *testing.T) {
	t.Parallel()
	for _, stall := range []time.Duration{1500 * time.Millisecond} {
		t.Run(fmt.Sprint(stall), func(t *testing.T) {
			t.Parallel()
			primary := redistest.Start(t)
			replica := redistest.StartReplica(t, primary)
			ctx := context.Background()
			key := "ack-self-" + randKey()
			admin := primary.Client(t)
			// A replica just started may still be syncing: the lock's
			// first write must not wait for that.
			locktest.Eventually(t, 10*time.Second, "the replica in sync", func() bool {
				n, err := admin.Do(ctx, "WAIT", 1, 100).Int()
				return err == nil && n >= 1
			})
			c := locktest.NewClient(t, primary.Client(t), lock.WithReplicaAck(1, 100*time.Millisecond))
			_, unlock := locktest.MustLock(t, c, ctx, key, lock.WithLease(holderLease))
			d2, r2 := lockAsync(c, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
			waitQueued(t, primary.Client(t), key, 1)
			waitSubscribed(t, primary.Client(t), key, 1)
			time.Sleep(50 * time.Millisecond)

			replica.Pause()
			err := unlock()
			t.Logf("unlock while the replica stalls: %v", err)
			time.Sleep(stall)
			replica.Resume()
			resumed := time.Now()
			locktest.Within(t, d2, holderLease+5*time.Second, "the waiter")
			took := r2.at.Sub(resumed)
			t.Logf("waiter: %v, %v after the replica resumed", r2.err, took)
			if r2.err == nil {
				defer func() { _ = r2.unlock() }()
			}
			if took > time.Second+locktest.Bound(500*time.Millisecond) {
				t.Errorf("the waiter the key was handed to returned %v after the replica answered again (%v); want within a claim window", took, r2.err)
			}
		})
	}
}
