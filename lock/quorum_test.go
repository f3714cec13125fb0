package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// quorumOf starts n independent redis-servers.
func quorumOf(t *testing.T, n int) ([]*redistest.Server, func() []redis.UniversalClient) {
	t.Helper()
	var srvs []*redistest.Server
	for range n {
		srvs = append(srvs, redistest.Start(t))
	}
	clients := func() []redis.UniversalClient {
		var rdbs []redis.UniversalClient
		for _, s := range srvs {
			rdbs = append(rdbs, s.Client(t))
		}
		return rdbs
	}
	return srvs, clients
}

func newQuorum(t *testing.T, rdbs []redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	// A generous node timeout: the race detector and parallel tests slow
	// this machine down (a busy one more, without LOCKKIT_TIMING=1); it is
	// still below the shortest lease these tests use (600 ms).
	nodeTimeout := 200 * time.Millisecond
	if !locktest.Tight() {
		nodeTimeout = 400 * time.Millisecond
	}
	c, err := lock.NewQuorum(rdbs, append([]lock.Option{lock.WithNodeTimeout(nodeTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestQuorumSurvivesMinorityDown(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srvs, clients := quorumOf(t, 5)
	c := newQuorum(t, clients(), lock.WithDefaultLease(time.Second))
	srvs[0].Stop()
	srvs[1].Stop()
	ctx := context.Background()
	lctx, unlock := locktest.MustLock(t, c, ctx, "q")
	if _, ok := lock.FencingToken(lctx, "q"); ok {
		t.Fatal("FencingToken ok in quorum mode")
	}
	inner, unlockInner := locktest.MustLock(t, c, lctx, "q") // re-entry needs a majority too
	if _, _, err := c.TryLock(ctx, "q"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second owner TryLock = %v", err)
	}
	time.Sleep(2 * time.Second) // two leases: only renewals by the majority keep it
	if inner.Err() != nil {
		t.Fatalf("lost with 3 of 5 nodes up: %v", context.Cause(inner))
	}
	if err := unlockInner(); err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	for _, s := range srvs[2:] {
		if locktest.Held(t, s.Client(t), "lockkit:{q}") {
			t.Fatalf("key left on %s after unlock", s.Addr)
		}
	}
}

func TestQuorumFailsWithMajorityDown(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srvs, clients := quorumOf(t, 5)
	c := newQuorum(t, clients())
	for _, s := range srvs[:3] {
		s.Stop()
	}
	ctx := context.Background()
	_, _, err := c.TryLock(ctx, "q")
	if err == nil || errors.Is(err, lock.ErrNotObtained) || !strings.Contains(err.Error(), "quorum of 3 not reached") {
		t.Fatalf("TryLock with 3 of 5 down = %v, want a quorum error", err)
	}
	_, _, err = c.Lock(ctx, "q", lock.WithMaxWait(time.Second))
	if err == nil || !strings.Contains(err.Error(), "quorum of 3 not reached") {
		t.Fatalf("Lock with 3 of 5 down = %v, want a quorum error", err)
	}
	for _, s := range srvs[3:] { // nothing held where it got through
		if locktest.Held(t, s.Client(t), "lockkit:{q}") {
			t.Fatalf("key left on %s by a failed acquisition", s.Addr)
		}
	}
}

func TestQuorumLossOfMajorityMidHold(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srvs, clients := quorumOf(t, 5)
	c := newQuorum(t, clients(), lock.WithDefaultLease(time.Second))
	lctx, unlock := locktest.MustLock(t, c, context.Background(), "q")
	for _, s := range srvs[:3] {
		s.Stop()
	}
	d := locktest.Within(t, lctx.Done(), 2*time.Second, "loss after the majority went down")
	if cause := context.Cause(lctx); cause != lock.ErrLost {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("unlock = %v, want ErrLost", err)
	}
	t.Logf("loss noticed %v after 3 of 5 nodes stopped (lease 1 s)", d)
}

func TestQuorumWakeUp(t *testing.T) {
	t.Parallel()
	srvs, clients := quorumOf(t, 3)
	holder := newQuorum(t, clients())
	waiter := newQuorum(t, clients())
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder, ctx, "qw") // 30 s lease
	done, res := lockAsync(waiter, ctx, "qw")
	for _, s := range srvs { // subscribed on every node: asleep
		waitSubscribed(t, s.Client(t), "qw", 1)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	locktest.Within(t, done, 5*time.Second, "quorum waiter")
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.unlock()
	if d := res.at.Sub(released); d > locktest.Bound(500*time.Millisecond) {
		t.Fatalf("waiter acquired %v after the release (lease 30 s)", d)
	}
}

func TestNewQuorumRejectsBadInput(t *testing.T) {
	t.Parallel()
	_, a := locktest.NewRedis(t)
	_, b := locktest.NewRedis(t)
	var nilClient *redis.Client
	tests := []struct {
		name  string
		nodes []redis.UniversalClient
		want  string
	}{
		{"none", nil, "at least 3"},
		{"two", []redis.UniversalClient{a, b}, "at least 3"},
		{"nil node", []redis.UniversalClient{a, b, nil}, "nil Redis client at index 2"},
		{"typed nil node", []redis.UniversalClient{a, nilClient, b}, "nil Redis client at index 1"},
		{"same node twice", []redis.UniversalClient{a, b, a}, "index 2 is also at index 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := lock.NewQuorum(tt.nodes)
			if c != nil || !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewQuorum = %v, %v; want ErrInvalid mentioning %q", c, err, tt.want)
			}
		})
	}
}
