package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

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
			primary := redistest.Start(t)
			replica := redistest.StartReplica(t, primary)
			ctx := context.Background()
			key := "ack-self-" + randKey()
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
