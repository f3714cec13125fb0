package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestPartitionedLeaderIsToldBeforeTheNextLeads: a leader whose
// connections go half-open (a partition: nothing forwarded, nothing
// closed) loses its term, its lead context ending with lock.ErrLost and
// IsLeader false, before a replica on the healthy side leads, which
// happens within lease + 1 s; the partitioned Run, cancelled while cut
// off, returns within 1 s. A sampler reads IsLeader of the
// three replicas throughout.
func TestPartitionedLeaderIsToldBeforeTheNextLeads(t *testing.T) {
	locktest.Timed(t)
	r, _ := newRedis(t)
	proxy := locktest.StartProxy(t, r.Addr)
	cut := locktest.NewClient(t, redis.NewClient(&redis.Options{Addr: proxy.Addr()}), lock.WithOwnerLabel("cut"))
	cs := append([]*lock.Client{cut}, replicas(t, r, 2)...)
	const lease = time.Second
	es := make([]*leader.Election, len(cs))
	for i, c := range cs {
		var err error
		if es[i], err = leader.New(c, "cut", leader.WithLease(lease)); err != nil {
			t.Fatal(err)
		}
	}
	s := sample(es)
	tr := newTracker()
	lead := func(i int) func(context.Context) error {
		return tr.lead(t, i, "cut", func(lctx context.Context) error {
			checkLeads(t, es[i], "cut", lctx)
			<-lctx.Done()
			if es[i].IsLeader() {
				t.Errorf("replica %d: IsLeader after its lead context ended", i)
			}
			return nil
		})
	}
	ctxs := make([]context.Context, len(es))
	stops := make([]context.CancelFunc, len(es))
	rets := make([]chan error, len(es))
	for i, e := range es {
		ctxs[i], stops[i] = context.WithCancel(context.Background())
		defer stops[i]()
		rets[i] = make(chan error, 1)
		go func() { rets[i] <- e.Run(ctxs[i], lead(i)) }()
		if i == 0 {
			if who := tr.next(t, locktest.Bound(2*time.Second)); who != 0 {
				t.Fatalf("replica %d led first", who)
			}
		}
	}
	locktest.Eventually(t, locktest.Bound(2*time.Second), "2 waiters queued", func() bool {
		info, err := cs[1].Inspect(context.Background(), leader.Key("cut"))
		return err == nil && len(info.Waiters) == 2
	})
	proxy.Freeze()
	frozen := time.Now()
	who := tr.next(t, lease+locktest.Bound(time.Second))
	took := time.Since(frozen)
	if who == 0 {
		t.Fatal("the partitioned replica led again")
	}
	// Its lead context ended before (the tracker counts live ones); its
	// lead, which the scheduler may run later, returns.
	var first term
	locktest.Eventually(t, locktest.Bound(time.Second), "the partitioned leader's lead returned", func() bool {
		terms, _ := tr.snapshot()
		first = terms[0]
		return !first.end.IsZero()
	})
	if !errors.Is(first.cause, lock.ErrLost) {
		t.Errorf("the partitioned leader's lead context ended with %v, want lock.ErrLost", first.cause)
	}
	t.Logf("replica %d leads %v after the partition (lease %v)", who, took, lease)

	// Its Run, still cut off, resigning (a release Redis does not answer)
	// or campaigning again, is cancelled: 1 s at most, as lock's unlock.
	limit := time.Second + locktest.Bound(100*time.Millisecond)
	stopped := time.Now()
	stops[0]()
	select {
	case err := <-rets[0]:
		if err != context.Canceled {
			t.Errorf("the partitioned replica's Run: %v", err)
		}
		t.Logf("the partitioned replica's Run returned %v after its context ended", time.Since(stopped))
	case <-time.After(limit):
		t.Errorf("the partitioned replica's Run, cancelled while cut off, goes on after %v", limit)
	}
	proxy.Thaw(0)
	stops[1]()
	stops[2]()
	for i := 1; i < len(es); i++ {
		select {
		case err := <-rets[i]:
			if err != context.Canceled {
				t.Errorf("replica %d's Run: %v", i, err)
			}
		case <-time.After(locktest.Bound(2 * time.Second)):
			t.Fatalf("replica %d's Run goes on %v after its context ended", i, locktest.Bound(2*time.Second))
		}
	}
	s.check(t)
	terms, most := tr.snapshot()
	checkTerms(t, terms, most)
}
