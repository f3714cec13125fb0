package leader_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// sampler reads Token (IsLeader with the term's token) of several
// Elections of one process as fast as it can, and finds two that lead at
// once: i leads with token a, then j leads, then i still leads with a.
type sampler struct {
	es      []*leader.Election
	stop    chan struct{}
	done    chan struct{}
	samples int
	both    []string
}

func sample(es []*leader.Election) *sampler {
	s := &sampler{es: es, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			for i, ei := range es {
				for j, ej := range es {
					if i == j {
						continue
					}
					a, ok1 := ei.Token()
					b, ok2 := ej.Token()
					c, ok3 := ei.Token()
					s.samples++
					if ok1 && ok2 && ok3 && a == c && len(s.both) < 5 {
						s.both = append(s.both, fmt.Sprintf("replica %d leads with token %d, then %d with %d, then %d still with %d", i, a, j, b, i, c))
					}
				}
			}
		}
	}()
	return s
}

// check stops the sampler and fails t if it found two leaders at once.
func (s *sampler) check(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	for _, b := range s.both {
		t.Errorf("two replicas lead at once: %s", b)
	}
	t.Logf("%d samples", s.samples)
}

// TestIsLeaderNeverOnTwoReplicasAtOnce: three replicas that lead 2 ms
// each in turn, sampled as fast as one goroutine can, never both say
// they lead with the same term; IsLeader and Token turn false as soon as
// the lead context ends, and Token is its fencing token.
func TestIsLeaderNeverOnTwoReplicasAtOnce(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	cs := replicas(t, r, 3)
	es := make([]*leader.Election, len(cs))
	for i, c := range cs {
		var err error
		if es[i], err = leader.New(c, "sampled", leader.WithBackoff(time.Millisecond, time.Millisecond), leader.WithLease(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	s := sample(es)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	tr := newTracker()
	var wg sync.WaitGroup
	for i, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.Run(ctx, tr.lead(t, i, "sampled", func(lctx context.Context) error {
				checkLeads(t, e, "sampled", lctx)
				select {
				case <-time.After(2 * time.Millisecond):
					return nil
				case <-lctx.Done():
				}
				if e.IsLeader() {
					t.Errorf("replica %d: IsLeader after its lead context ended", i)
				}
				return nil
			}))
			if err != context.DeadlineExceeded {
				t.Errorf("Run of replica %d: %v", i, err)
			}
		}()
	}
	locktest.Within(t, locktest.Waited(&wg), locktest.Bound(3*time.Second), "every Run returned")
	s.check(t)
	terms, most := tr.snapshot()
	checkTerms(t, terms, most)
	if len(terms) < locktest.Least(20) {
		t.Errorf("%d terms, want at least %d", len(terms), locktest.Least(20))
	}
}

// checkLeads fails t unless e says it leads, with lctx's fencing token,
// while lctx is live.
func checkLeads(t *testing.T, e *leader.Election, name string, lctx context.Context) {
	t.Helper()
	tok, ok := e.Token()
	is := e.IsLeader()
	want, wok := lock.FencingToken(lctx, leader.Key(name))
	if lctx.Err() == nil && (!ok || !wok || tok != want || !is) { // live after the reads: live during them
		t.Errorf("in lead: IsLeader %v, Token %d %v; want true, the lead context's %d %v", is, tok, ok, want, wok)
	}
}
