package reliability_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// promotionLease is the lease of the locks of TestManualPromotion.
const promotionLease = time.Second

// promoted starts a primary and its replica, runs before while both
// replicate, then promotes the replica by hand (REPLICAOF NO ONE), as an
// operator or a script without Sentinel does, leaving the old primary
// up: clients that still reach it go on writing there. It returns both,
// and when the promotion was done.
func promoted(t *testing.T, before func(primary, replica *redistest.Server)) (primary, replica *redistest.Server, at int64) {
	t.Helper()
	primary = redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica = redistest.StartReplica(t, primary, "--repl-diskless-sync-delay", "0")
	before(primary, replica)
	ctx := context.Background()
	// The replica has everything written so far before it is promoted.
	if err := primary.Client(t).Do(ctx, "WAIT", 1, 1000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Client(t).ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatalf("REPLICAOF NO ONE: %v", err)
	}
	return primary, replica, now()
}

// TestManualPromotion shows what a replica promoted by hand, with some
// clients left on the old primary, does to locks. Without
// lock.WithReplicaAck it is a split brain: a lock held across the
// promotion is taken on the promoted side once its lease lapses there
// (the holder renews on the old side, and its context stays live), and a
// key released before the promotion is taken on both sides at once with
// the same fencing token. With lock.WithReplicaAck(1, ...) it is an
// outage instead: neither side has a replica, so the holder is told
// lock.ErrLost within its lease and every acquisition on either side
// fails with lock.ErrReplicaAck.
func TestManualPromotion(t *testing.T) {
	t.Parallel()
	t.Run("split brain", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		var held context.Context
		var heldToken uint64
		primary, replica, at := promoted(t, func(primary, _ *redistest.Server) {
			a := leaseClient(t, primary.Client(t), promotionLease)
			var unlock lock.UnlockFunc
			var err error
			if held, unlock, err = a.Lock(ctx, "across"); err != nil {
				t.Fatal(err)
			}
			heldToken, _ = lock.FencingToken(held, "across")
			t.Cleanup(func() { _ = unlock() })
			// Released before the promotion: both sides have its last token.
			_, unlockReleased, err := a.Lock(ctx, "released")
			if err != nil {
				t.Fatal(err)
			}
			if err := unlockReleased(); err != nil {
				t.Fatal(err)
			}
		})
		onNew := leaseClient(t, replica.Client(t), promotionLease)
		onOld := leaseClient(t, primary.Client(t), promotionLease)

		// Both sides hand out "released" at once, with one token.
		newCtx, unlockNew, err := onNew.Lock(ctx, "released")
		if err != nil {
			t.Fatal(err)
		}
		oldCtx, unlockOld, err := onOld.Lock(ctx, "released")
		if err != nil {
			t.Fatal(err)
		}
		newToken, _ := lock.FencingToken(newCtx, "released")
		oldToken, _ := lock.FencingToken(oldCtx, "released")
		if newCtx.Err() != nil || oldCtx.Err() != nil || newToken != oldToken {
			t.Errorf("a key released before the promotion: promoted side token %d (%v), old side token %d (%v); want both held with one token",
				newToken, newCtx.Err(), oldToken, oldCtx.Err())
		}
		_, _ = unlockNew(), unlockOld()

		// The lock held across the promotion is taken on the promoted side
		// while its holder, renewing on the old side, is live.
		takenCtx, unlockTaken, err := onNew.Lock(ctx, "across")
		if err != nil {
			t.Fatal(err)
		}
		taken := now()
		takenToken, _ := lock.FencingToken(takenCtx, "across")
		if held.Err() != nil {
			t.Errorf("holder on the old primary lost its lock (%v); want it live while the promoted side hands the key out", context.Cause(held))
		}
		_ = unlockTaken()
		t.Logf("a key released before the promotion: both sides gave it out at once with token %d; a lock held across it: taken on the promoted side %s after the promotion (token %d, the holder's %d), the holder on the old side still live",
			newToken, ms(taken-at), takenToken, heldToken)
	})
	t.Run("WithReplicaAck", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ack := lock.WithReplicaAck(1, 200*time.Millisecond)
		ackClient := func(rdb redis.UniversalClient) *lock.Client {
			c, err := lock.New(rdb, lock.WithDefaultLease(promotionLease), ack)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		var held context.Context
		primary, replica, at := promoted(t, func(primary, _ *redistest.Server) {
			c := ackClient(primary.Client(t))
			var err error
			// A replica just started may confirm its first writes late on a
			// loaded machine.
			for range 10 {
				if held, _, err = c.Lock(ctx, "across"); !errors.Is(err, lock.ErrReplicaAck) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		})
		var told atomic.Int64
		context.AfterFunc(held, func() { told.Store(now()) })
		sides := []*lock.Client{ackClient(replica.Client(t)), ackClient(primary.Client(t))}
		refused := 0
		for end := at + int64(3*promotionLease); now() < end; time.Sleep(50 * time.Millisecond) {
			for i, c := range sides {
				_, unlock, err := c.TryLock(ctx, [...]string{"across", "other"}[refused%2])
				if err == nil {
					_ = unlock()
					t.Fatalf("side %d (0: promoted, 1: old) gave a lock out with no replica to confirm it", i)
				}
				if !errors.Is(err, lock.ErrReplicaAck) {
					t.Fatalf("side %d: TryLock %v, want lock.ErrReplicaAck", i, err)
				}
				refused++
			}
		}
		select {
		case <-held.Done():
		default:
			t.Fatalf("holder still live %v after the promotion", 3*promotionLease)
		}
		if cause := context.Cause(held); !errors.Is(cause, lock.ErrLost) {
			t.Errorf("holder's context ended with %v, want lock.ErrLost", cause)
		}
		if d := told.Load() - at; d > int64(promotionLease*3/2) {
			t.Errorf("holder told %s after the promotion, more than 1.5 times its %v lease", ms(d), promotionLease)
		}
		t.Logf("holder told %q %s after the promotion; %d of %d acquisitions over %v refused with %q on both sides",
			context.Cause(held), ms(told.Load()-at), refused, refused, 3*promotionLease, lock.ErrReplicaAck)
	})
}
