package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

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
