package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestLossRacingReturnNeverOverlaps: three replicas lead for about their
// 300 ms lease each, and return, while the commands of two of them go
// through proxies that hold them back 0 to 200 ms, changing at random
// (renewals late: losses, some at the moment lead returns). One lead at
// a time with a live context, tokens increasing, and the replicas lead
// in turn (about one term in five ends with lock.ErrLost).
func TestLossRacingReturnNeverOverlaps(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	const lease = 300 * time.Millisecond
	proxies := []*locktest.Proxy{locktest.StartProxy(t, r.Addr), locktest.StartProxy(t, r.Addr)}
	lockers := []lock.Locker{replicas(t, r, 1)[0]}
	for _, p := range proxies {
		lockers = append(lockers, locktest.NewClient(t, redis.NewClient(&redis.Options{Addr: p.Addr()})))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	varied := make(chan struct{})
	go func() { // the proxies' delays change every 50 ms
		defer close(varied)
		for ctx.Err() == nil {
			for _, p := range proxies {
				p.SlowClients(time.Duration(rand.IntN(5)) * 50 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, p := range proxies {
			p.SlowClients(0)
		}
	}()
	tr := newTracker()
	done := runAll(t, ctx, lockers, "race", func(i int) func(context.Context) error {
		return tr.lead(t, i, "race", func(lctx context.Context) error {
			select {
			case <-time.After(lease - 50*time.Millisecond + time.Duration(rand.IntN(100))*time.Millisecond):
			case <-lctx.Done():
			}
			return nil
		})
	}, leader.WithLease(lease), leader.WithBackoff(time.Millisecond, 10*time.Millisecond), leader.WithLogger(slog.New(slog.DiscardHandler)))
	locktest.Within(t, done, locktest.Bound(3*time.Second), "every Run returned")
	<-varied
	terms, most := tr.snapshot()
	checkTerms(t, terms, most)
	lost, by := 0, map[int]int{}
	for _, tm := range terms {
		by[tm.who]++
		if errors.Is(tm.cause, lock.ErrLost) {
			lost++
		}
	}
	t.Logf("%d terms, %d lost, by replica %v", len(terms), lost, by)
	if len(terms) < locktest.Least(4) || len(by) < 2 {
		t.Errorf("%d terms by %d replicas, want at least %d by 2 or more", len(terms), len(by), locktest.Least(4))
	}
}
