package leader_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestQuorumElection: an election on a lock.NewQuorum Client of 3 Redis
// masters leads one replica at a time; IsLeader follows the term, and
// Token says there is none (quorum mode has no fencing tokens).
func TestQuorumElection(t *testing.T) {
	t.Parallel()
	var nodes [2][]redis.UniversalClient
	for range 3 {
		r, _ := newRedis(t)
		for i := range nodes {
			nodes[i] = append(nodes[i], r.Client(t))
		}
	}
	es := make([]*leader.Election, 2)
	for i := range es {
		c, err := lock.NewQuorum(nodes[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if es[i], err = leader.New(c, "quorum", leader.WithBackoff(time.Millisecond, time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex // the leads share terms; Redis orders them, not Go
	terms := 0
	lead := func(i int) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			tok, ok := es[i].Token()
			if !es[i].IsLeader() || es[1-i].IsLeader() || ok || tok != 0 {
				t.Errorf("election %d leads: IsLeader %v (other %v), Token %d %v; want true (false), 0 false",
					i, es[i].IsLeader(), es[1-i].IsLeader(), tok, ok)
			}
			if terms++; terms == 10 {
				cancel()
			}
			return nil
		}
	}
	errs := make(chan error, 2)
	for i := range es {
		go func() { errs <- es[i].Run(ctx, lead(i)) }()
	}
	for range es {
		if err := <-errs; err != context.Canceled {
			t.Errorf("Run: %v", err)
		}
	}
	if terms < 10 {
		t.Errorf("%d terms", terms)
	}
}
