package leader_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestHalfOpenPubSubNeitherEndsNorBlocksATerm: a replica whose pub/sub
// connection goes half-open (silent, not closed) while it waits still
// leads within 2 s (the lock's claim window) of the leader's
// resignation; it keeps its term past twice its 1 s lease (renewals use
// other connections); when it resigns, the other replica leads at once.
func TestHalfOpenPubSubNeitherEndsNorBlocksATerm(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	proxy := locktest.StartProxy(t, r.Addr)
	cs := []*lock.Client{
		locktest.NewClient(t, redis.NewClient(&redis.Options{Addr: proxy.Addr()}), lock.WithOwnerLabel("cut")),
		replicas(t, r, 1)[0],
	}
	const lease = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := newTracker()
	resign := []chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	var wg sync.WaitGroup
	run := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := leader.Run(ctx, cs[i], "pubsub", tr.lead(t, i, "pubsub", func(lctx context.Context) error {
				select {
				case <-resign[i]:
				case <-lctx.Done():
				}
				return nil
			}), leader.WithLease(lease), leader.WithBackoff(10*time.Millisecond, 10*time.Millisecond))
			if err != context.Canceled {
				t.Errorf("Run of replica %d: %v", i, err)
			}
		}()
	}
	run(1)
	if who := tr.next(t, locktest.Bound(2*time.Second)); who != 1 {
		t.Fatalf("replica %d leads, want 1", who)
	}
	run(0)
	locktest.Eventually(t, locktest.Bound(2*time.Second), "replica 0 queued", func() bool {
		info, err := cs[1].Inspect(context.Background(), leader.Key("pubsub"))
		return err == nil && len(info.Waiters) == 1
	})
	// Replica 0 waits, subscribed: its pub/sub connection goes silent
	// after the next delivery (a health check's answer).
	locktest.Within(t, proxy.CutPubSubAfterNextDelivery(), locktest.Bound(5*time.Second), "a delivery on the pub/sub connection")
	resign[1] <- struct{}{}
	resigned := time.Now()
	if who := tr.next(t, 2*time.Second+locktest.Bound(time.Second)); who != 0 {
		t.Fatalf("replica %d leads, want 0", who)
	}
	t.Logf("replica 0, its pub/sub connection half-open, leads %v after replica 1 resigned", time.Since(resigned))
	kept := time.Now()
	time.Sleep(2 * lease) // what is checked: a term that lasts
	terms, _ := tr.snapshot()
	if last := terms[len(terms)-1]; last.who != 0 || last.ctx.Err() != nil {
		t.Fatalf("after 2 leases with its pub/sub cut, the leader's term: replica %d, %v", last.who, context.Cause(last.ctx))
	}
	t.Logf("replica 0 kept its term %v with its pub/sub connection half-open", time.Since(kept))
	resign[0] <- struct{}{}
	resigned = time.Now()
	if who := tr.next(t, locktest.Bound(time.Second)); who != 1 {
		t.Fatalf("replica %d leads after the resignation, want 1", who)
	}
	t.Logf("replica 1 leads %v after replica 0 resigned", time.Since(resigned))
	cancel()
	locktest.Within(t, locktest.Waited(&wg), locktest.Bound(2*time.Second), "every Run returned")
	terms, most := tr.snapshot()
	checkTerms(t, terms, most)
}
