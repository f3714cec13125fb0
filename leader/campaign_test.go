package leader_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// countingLocker records when each campaign (Lock call) started and
// ended.
type countingLocker struct {
	lock.Locker
	mu           sync.Mutex
	starts, ends []time.Time
}

func (c *countingLocker) Lock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	c.mu.Lock()
	c.starts = append(c.starts, time.Now())
	c.mu.Unlock()
	lctx, unlock, err := c.Locker.Lock(ctx, key, opts...)
	c.mu.Lock()
	c.ends = append(c.ends, time.Now())
	c.mu.Unlock()
	return lctx, unlock, err
}

// TestRedisDownCampaignsWithBackoff: while Redis is down, campaigns fail
// and Run pauses between them as the back-off says, doubling: no hot
// loop; once Redis is back, it leads.
func TestRedisDownCampaignsWithBackoff(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1}) // each campaign fails at once
	cl := &countingLocker{Locker: locktest.NewClient(t, rdb)}
	t.Cleanup(func() { _ = rdb.Close() })
	r.Stop()
	const initial, most = 10 * time.Millisecond, 160 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- leader.Run(ctx, cl, "down", func(ctx context.Context) error {
			close(leading)
			<-ctx.Done()
			return nil
		}, leader.WithBackoff(initial, most), leader.WithLogger(slog.New(slog.DiscardHandler)))
	}()
	time.Sleep(time.Second)
	cl.mu.Lock()
	starts, ends := append([]time.Time(nil), cl.starts...), append([]time.Time(nil), cl.ends...)
	cl.mu.Unlock()
	// Between a campaign's end and the next one's start: the back-off.
	pause := initial
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(ends[i-1]); gap < pause {
			t.Errorf("campaign %d started %v after the one before failed, want at least the back-off %v", i, gap, pause)
		}
		pause = min(2*pause, most)
	}
	// Pauses of 10+20+40+80 ms, then 160 ms: at most 10 campaigns start in 1 s.
	if len(starts) < 2 || len(starts) > 10 {
		t.Errorf("%d campaigns in 1 s with Redis down, want 2 to 10", len(starts))
	}
	t.Logf("%d campaigns in 1 s with Redis down", len(starts))
	r.Restart()
	locktest.Within(t, leading, locktest.Bound(most+time.Second), "leading once Redis is back")
	cancel()
	if err := <-ran; err != context.Canceled {
		t.Errorf("Run: %v", err)
	}
}

// TestCancelDuringCampaignLeavesNoHold: a replica whose context ends
// while it waits for the lock returns at once and is not handed the lock
// afterwards: when the leader resigns, no one leads.
func TestCancelDuringCampaignLeavesNoHold(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	tr := newTracker()
	lctx, stopLeader := context.WithCancel(context.Background())
	defer stopLeader()
	led := make(chan error, 1)
	go func() { led <- leader.Run(lctx, cs[0], "cancel", tr.lead(t, 0, "cancel", nil)) }()
	tr.next(t, locktest.Bound(2*time.Second))
	wctx, stopWaiter := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- leader.Run(wctx, cs[1], "cancel", tr.lead(t, 1, "cancel", nil)) }()
	locktest.Eventually(t, locktest.Bound(2*time.Second), "the waiter queued", func() bool {
		info, err := cs[0].Inspect(context.Background(), leader.Key("cancel"))
		return err == nil && len(info.Waiters) == 1
	})
	start := time.Now()
	stopWaiter()
	if err := <-waited; err != context.Canceled {
		t.Errorf("the waiter's Run: %v", err)
	}
	if took := time.Since(start); took > locktest.Bound(100*time.Millisecond) {
		t.Errorf("the waiter's Run returned %v after its context ended", took)
	}
	stopLeader()
	<-led
	if info, err := leader.Current(context.Background(), cs[0], "cancel"); err != nil || info.Led {
		t.Errorf("after both stopped: %+v, %v; want no leader", info, err)
	}
	if terms, _ := tr.snapshot(); len(terms) != 1 {
		t.Errorf("%d terms, want the first leader's only", len(terms))
	}
}
