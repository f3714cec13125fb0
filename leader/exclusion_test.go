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

// checkTerms fails t unless one lead ran with a live context at a time
// and each term has a greater fencing token than the one before.
func checkTerms(t *testing.T, terms []term, most int) {
	t.Helper()
	if most != 1 {
		t.Errorf("%d lead functions ran with live contexts at once, want 1", most)
	}
	for i := 1; i < len(terms); i++ {
		if a, b := terms[i-1], terms[i]; b.token <= a.token {
			t.Errorf("term %d (replica %d) has token %d, not above term %d's (replica %d) %d", i, b.who, b.token, i-1, a.who, a.token)
		}
	}
}

// churn runs n Elections that each lead for 5 ms and return, for d, and
// checks that one led at a time and that several did lead.
func churn(t *testing.T, lockers []lock.Locker, d time.Duration) {
	tr := newTracker()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	hold := func(ctx context.Context) error {
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}
	done := runAll(t, ctx, lockers, "churn", func(i int) func(context.Context) error {
		return tr.lead(t, i, "churn", hold)
	}, leader.WithBackoff(time.Millisecond, time.Millisecond), leader.WithLease(time.Second))
	locktest.Within(t, done, d+locktest.Bound(2*time.Second), "every Run returned")
	terms, most := tr.snapshot()
	checkTerms(t, terms, most)
	leaders := map[int]bool{}
	for _, tm := range terms {
		leaders[tm.who] = true
	}
	if len(terms) < locktest.Least(20) || len(leaders) < 2 {
		t.Errorf("%d terms led by %d replicas in %v, want at least %d by 2 or more", len(terms), len(leaders), d, locktest.Least(20))
	}
	t.Logf("%d terms by %d replicas in %v", len(terms), len(leaders), d)
}

func TestOneLeaderAmongElectionsOfOneClient(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	churn(t, []lock.Locker{c, c, c, c, c}, time.Second)
}

func TestOneLeaderAmongClients(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	var ls []lock.Locker
	for _, c := range replicas(t, r, 4) {
		ls = append(ls, c)
	}
	churn(t, ls, time.Second)
}

// TestLeadContextEndsWithErrLostOnLoss: a leader cut off from Redis (a
// network partition) cannot renew its lease and hears of it through its
// lead context, with cause lock.ErrLost, before the other replica leads.
func TestLeadContextEndsWithErrLostOnLoss(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	proxy := locktest.StartProxy(t, r.Addr)
	cut := locktest.NewClient(t, redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1}), lock.WithOwnerLabel("cut"))
	other := replicas(t, r, 1)[0]
	tr := newTracker()
	ctx, cancel := context.WithCancel(context.Background())
	opts := []leader.Option{leader.WithLease(300 * time.Millisecond), leader.WithBackoff(10*time.Millisecond, 10*time.Millisecond)}
	first := runAll(t, ctx, []lock.Locker{cut}, "lost", func(int) func(context.Context) error { return tr.lead(t, 0, "lost", nil) }, opts...)
	defer func() { cancel(); proxy.Thaw(0); <-first }()
	tr.next(t, locktest.Bound(2*time.Second))
	second := runAll(t, ctx, []lock.Locker{other}, "lost", func(int) func(context.Context) error { return tr.lead(t, 1, "lost", nil) }, opts...)
	defer func() { cancel(); <-second }()
	time.Sleep(50 * time.Millisecond) // the other replica queues
	proxy.Freeze()
	if who := tr.next(t, locktest.Bound(3*time.Second)); who != 1 {
		t.Fatalf("replica %d led next, want the one not cut off", who)
	}
	terms, most := tr.snapshot()
	checkTerms(t, terms, most)
	if cause := context.Cause(terms[0].ctx); !errors.Is(cause, lock.ErrLost) {
		t.Errorf("the cut-off leader's lead context ended with cause %v, want lock.ErrLost", cause)
	}
}
