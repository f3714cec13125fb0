package lock_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
)

// attemptCounter counts the attempts to acquire one lock hash (acquire.lua:
// 4 keys and 6 arguments), sent alone or in a pipeline.
type attemptCounter struct {
	key string
	n   atomic.Int64
}

func (h *attemptCounter) count(cmd redis.Cmder) {
	if args := cmd.Args(); len(args) == 13 && args[3] == h.key {
		h.n.Add(1)
	}
}

func (h *attemptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *attemptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *attemptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// TestSubscriptionAcrossRedisDown: Redis goes down (2 s) while a waiter
// waits and comes back empty. It goes down once the waiter is asleep: its
// second attempt, which follows the subscription's confirmation, made. While it is down the receive loop redials at
// most about every 100 ms (no busy loop); once it is back, the
// resubscription wakes the waiter, which takes the now free key at once
// rather than at the old holder's lease end.
func TestSubscriptionAcrossRedisDown(t *testing.T) {
	t.Parallel()
	srv, admin := newReal(t)
	var dials atomic.Int64
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	wrdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: dialer})
	t.Cleanup(func() { _ = wrdb.Close() })
	key := "down-" + randKey()
	attempts := &attemptCounter{key: "lockkit:{" + key + "}"}
	wrdb.AddHook(attempts)
	waiter := locktest.NewClient(t, wrdb)
	ctx := context.Background()
	holdByGhost(t, admin, key, 30*time.Second)
	done, res := lockAsync(waiter, ctx, key)
	waitSubscribed(t, admin, key, 1)
	waitQueued(t, admin, key, 1)
	// The first attempt queued the waiter; the second follows the
	// confirmation of its subscription, which the Client may read only
	// after Redis registered it. Made while Redis is down, it would fail.
	locktest.Eventually(t, 5*time.Second, "the waiter's attempt after its subscription", func() bool {
		return attempts.n.Load() >= 2
	})
	srv.Stop()
	before := dials.Load()
	time.Sleep(2 * time.Second)
	n := dials.Load() - before
	t.Logf("%d dials in 2 s with Redis down", n)
	if n > 40 {
		t.Errorf("%d dials in 2 s with Redis down: a busy loop", n)
	}
	back := time.Now()
	srv.Restart()
	locktest.Within(t, done, 5*time.Second, "the waiter")
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer func() { _ = res.unlock() }()
	d := res.at.Sub(back)
	t.Logf("the waiter got the key %v after Redis was restarted", d)
	if d > time.Second+locktest.Bound(500*time.Millisecond) {
		t.Errorf("the waiter got the free key %v after Redis was restarted, want within 1.5 s", d)
	}
}
