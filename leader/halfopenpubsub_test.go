package leader_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestHalfOpenPubSubNeitherEndsNorBlocksATerm: a leader whose pub/sub
// connection goes half-open (silent, not closed) keeps its term past
// twice its 1 s lease (its renewals use other connections), while the
// other replica waits; after it resigns the other leads at once; when
// that one resigns in turn, the replica with the dead subscription, now
// waiting, leads within 2 s (the lock's claim window) all the same.
func TestHalfOpenPubSubNeitherEndsNorBlocksATerm(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	proxy := locktest.StartProxy(t, r.Addr)
	cs := []lock.Locker{
		locktest.NewClient(t, redis.NewClient(&redis.Options{Addr: proxy.Addr()}), lock.WithOwnerLabel("cut")),
		replicas(t, r, 1)[0],
	}
	const lease = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := newTracker()
	resign := []chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	done := runAll(t, ctx, cs, "pubsub", func(i int) func(context.Context) error {
		return tr.lead(t, i, "pubsub", func(lctx context.Context) error {
			select {
			case <-resign[i]:
			case <-lctx.Done():
			}
			return nil
		})
	}, leader.WithLease(lease), leader.WithBackoff(10*time.Millisecond, 10*time.Millisecond))
	first := tr.next(t, locktest.Bound(2*time.Second))
	if first != 0 { // replica 1 led first: it resigns, and replica 0 leads
		resign[1] <- struct{}{}
		if who := tr.next(t, locktest.Bound(2*time.Second)); who != 0 {
			t.Fatalf("replica %d leads, want 0", who)
		}
	}
	// Replica 0 subscribed when it waited, or subscribes now to wait for
	// nothing: cut its pub/sub connection after the next delivery.
	locktest.Within(t, proxy.CutPubSubAfterNextDelivery(), locktest.Bound(5*time.Second), "a delivery on the pub/sub connection")
	kept := time.Now()
	time.Sleep(2 * lease)
	terms, _ := tr.snapshot()
	last := terms[len(terms)-1]
	if last.who != 0 || last.ctx.Err() != nil {
		t.Fatalf("after 2 leases with its pub/sub cut, the leader's term: replica %d, %v", last.who, context.Cause(last.ctx))
	}
	t.Logf("the leader kept its term %v with its pub/sub connection half-open", time.Since(kept))
	resign[0] <- struct{}{}
	resigned := time.Now()
	if who := tr.next(t, locktest.Bound(time.Second)); who != 1 {
		t.Fatalf("replica %d leads after the resignation, want 1", who)
	}
	t.Logf("replica 1 leads %v after replica 0 resigned", time.Since(resigned))
	// Replica 0 waits with its subscription dead; replica 1 resigns.
	locktest.Eventually(t, locktest.Bound(2*time.Second), "replica 0 queued", func() bool {
		info, err := cs[1].(*lock.Client).Inspect(context.Background(), leader.Key("pubsub"))
		return err == nil && len(info.Waiters) == 1
	})
	resign[1] <- struct{}{}
	resigned = time.Now()
	if who := tr.next(t, 2*time.Second+locktest.Bound(time.Second)); who != 0 {
		t.Fatalf("replica %d leads, want 0", who)
	}
	t.Logf("replica 0, its pub/sub connection half-open, leads %v after replica 1 resigned", time.Since(resigned))
	cancel()
	locktest.Within(t, done, locktest.Bound(2*time.Second), "every Run returned")
	terms, most := tr.snapshot()
	checkTerms(t, terms, most)
}
