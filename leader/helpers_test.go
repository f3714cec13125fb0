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

// replicas returns n lock Clients of one Redis, each with a connection of
// its own and owner label "r<i>", as n processes of a service would have.
func replicas(t *testing.T, r *locktest.Redis, n int, opts ...lock.Option) []*lock.Client {
	t.Helper()
	cs := make([]*lock.Client, n)
	for i := range cs {
		o := append([]lock.Option{lock.WithOwnerLabel("r" + string(rune('0'+i)))}, opts...)
		cs[i] = locktest.NewClient(t, r.Client(t), o...)
	}
	return cs
}

// newRedis starts a redis-server for the test.
func newRedis(t *testing.T) (*locktest.Redis, *redis.Client) {
	t.Helper()
	return locktest.NewRedis(t)
}

// A term is one lead call as a tracker saw it.
type term struct {
	who        int
	token      uint64
	ctx        context.Context // the lead context
	start, end time.Time       // end: when lead returned
	cause      error           // the lead context's cause when lead returned
}

// tracker records the lead calls of several Elections, and the most that
// ran with a live lead context at once: when a lead starts, it counts the
// other leads running whose context has not ended.
type tracker struct {
	mu      sync.Mutex
	running map[int]context.Context // by term index
	most    int
	terms   []term
	start   chan int // receives who, each time a lead starts (buffered)
}

func newTracker() *tracker {
	return &tracker{running: map[int]context.Context{}, start: make(chan int, 64)}
}

// lead returns replica who's lead function: it records the term and runs
// until (nil: waits for its context to end).
func (tr *tracker) lead(t *testing.T, who int, name string, until func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		tok, ok := lock.FencingToken(ctx, leader.Key(name))
		if !ok {
			t.Errorf("replica %d leads without a fencing token in its context", who)
		}
		tr.mu.Lock()
		live := 1
		for _, c := range tr.running {
			if c.Err() == nil {
				live++
			}
		}
		tr.most = max(tr.most, live)
		tr.terms = append(tr.terms, term{who: who, token: tok, ctx: ctx, start: time.Now()})
		i := len(tr.terms) - 1
		tr.running[i] = ctx
		tr.mu.Unlock()
		select {
		case tr.start <- who:
		default:
		}
		var err error
		if until != nil {
			err = until(ctx)
		} else {
			<-ctx.Done()
		}
		tr.mu.Lock()
		delete(tr.running, i)
		tr.terms[i].end = time.Now()
		tr.terms[i].cause = context.Cause(ctx)
		tr.mu.Unlock()
		return err
	}
}

// snapshot returns the terms so far and the most leads live at once.
func (tr *tracker) snapshot() ([]term, int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]term(nil), tr.terms...), tr.most
}

// next waits for the next lead to start and returns its replica.
func (tr *tracker) next(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case who := <-tr.start:
		return who
	case <-time.After(limit):
		t.Fatalf("no lead started within %v", limit)
		return -1
	}
}

// runAll runs one Election per locker until ctx ends and returns a
// channel closed when every Run returned; each Run must return ctx's
// error.
func runAll(t *testing.T, ctx context.Context, lockers []lock.Locker, name string, lead func(i int) func(context.Context) error, opts ...leader.Option) <-chan struct{} {
	t.Helper()
	var wg sync.WaitGroup
	for i, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := leader.Run(ctx, l, name, lead(i), opts...); err != ctx.Err() {
				t.Errorf("Run of replica %d: %v, want ctx's error %v", i, err, ctx.Err())
			}
		}()
	}
	return locktest.Waited(&wg)
}
