package lock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Quorum mode (NewQuorum): a lock is held while a majority of independent
// nodes grant it; waiters wake up without waking themselves.

// exported reports whether err is one a caller can act on: it matches an
// exported sentinel of package lock, or wraps a Redis or network error.
func exported(err error) bool {
	for _, s := range []error{lock.ErrNotObtained, lock.ErrLost, lock.ErrClosed, lock.ErrNotHeld, lock.ErrInvalid} {
		if errors.Is(err, s) {
			return true
		}
	}
	var re redis.Error
	var ne net.Error
	return errors.As(err, &re) || errors.As(err, &ne)
}

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

// keyHook counts the commands a go-redis client sends that name key, and
// holds back each after the first for delay before go-redis sends it: a
// node whose goroutine or connection is not ready when the majority has
// answered.
type keyHook struct {
	key   string
	delay time.Duration
	mu    sync.Mutex
	count int
}

func (h *keyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *keyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.names(cmd) > 1 {
			time.Sleep(h.delay)
		}
		return next(ctx, cmd)
	}
}

func (h *keyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// names returns how many commands named the key, cmd included if it does;
// 0 when cmd does not.
func (h *keyHook) names(cmd redis.Cmder) int {
	for _, a := range cmd.Args() {
		if a == h.key {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.count++
			return h.count
		}
	}
	return 0
}

func (h *keyHook) commands() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// TestQuorumMutualExclusion does the same in quorum mode over 3 masters.
func TestQuorumMutualExclusion(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srvs, clients := quorumOf(t, 3)
	var lockers []lock.Locker
	for range 3 {
		lockers = append(lockers, newQuorum(t, clients()))
	}
	hammer(t, lockers, srvs[0].Client(t), []string{"qm"}, 9, 40, lock.WithMaxWait(30*time.Second))
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

// In quorum mode with two of three nodes frozen, TryLock fails with an
// error a caller can match (a Redis/network error or an exported one),
// not only with the package's internal "no answer within the node
// timeout".
func TestQuorumNoMajorityErrorIsExported(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srvs, clients := quorumOf(t, 3)
	c := newQuorum(t, clients())
	ctx := context.Background()
	_, u := locktest.MustLock(t, c, ctx, "warm")
	_ = u()
	srvs[0].Pause()
	srvs[1].Pause()
	t.Cleanup(srvs[0].Resume)
	t.Cleanup(srvs[1].Resume)
	_, _, err := c.TryLock(ctx, "q")
	t.Logf("TryLock with 2 of 3 nodes frozen: %v", err)
	if err == nil || !exported(err) {
		t.Errorf("TryLock with no majority = %q: matches no exported error, no Redis or network error", err)
	}
}

func TestHeldQuorum(t *testing.T) {
	t.Parallel()
	_, clients := quorumOf(t, 3)
	c := newQuorum(t, clients())
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "q:1")
	defer unlock()
	perNode := map[string]int{}
	for info, err := range c.List(ctx, "q:*") {
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != "q:1" || info.Node == "" {
			t.Fatalf("yielded %+v", info)
		}
		perNode[info.Node]++
	}
	if len(perNode) < 2 {
		t.Fatalf("listed on %d nodes, want at least a majority: %v", len(perNode), perNode)
	}
}

// TestQuorumSiblingsDoNotStall: in quorum mode two Lock calls of one
// Client can each take one node (a split vote, the third node held or
// slow) and both release their minority. Their release messages wake the
// waiters of other Clients; this Client's own waiters, which ignore its
// messages, must be woken too, or they sleep until the lease they last saw
// ends (30 s) while a majority is free.
func TestQuorumSiblingsDoNotStall(t *testing.T) {
	t.Parallel() // its own servers
	_, clients := quorumOf(t, 3)
	c := newQuorum(t, clients())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 60 {
				// No work in between: the next Lock races the woken
				// waiter for the nodes, as a busy service's would.
				_, unlock, err := c.Lock(context.Background(), "siblings", lock.WithMaxWait(5*time.Second))
				if err == nil {
					err = unlock()
				}
				if err != nil {
					errs <- err // a wait of 5 s: woken by nothing
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestQuorumReleaseReachesSlowNode: an unlock in quorum mode returns at
// the majority's answer; its release must still reach the node that was
// slower to start, which otherwise keeps the key for the whole lease for
// an owner that let go (with two such nodes no one gets a majority).
func TestQuorumReleaseReachesSlowNode(t *testing.T) {
	t.Parallel() // its own servers
	srvs, clients := quorumOf(t, 3)
	ctx := context.Background()
	// Lock's command on the slow node is the first to name the key, the
	// release the second.
	warmScripts(t, srvs[2])
	rdbs := clients()
	rdbs[2].AddHook(&keyHook{key: "lockkit:{slow}", delay: 50 * time.Millisecond})
	c := newQuorum(t, rdbs)
	_, unlock := locktest.MustLock(t, c, ctx, "slow")
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	waitReleasedOn(t, srvs[2].Client(t), "lockkit:{slow}", 2*time.Second)
}

// TestQuorumWaiterDoesNotWakeItself: another Client holds the key on a
// majority and the third node is free. Each attempt of a waiter takes that
// node and lets go of it; its own release must not wake it to try again at
// once, or it asks Redis again and again until the holder's lease ends.
func TestQuorumWaiterDoesNotWakeItself(t *testing.T) {
	t.Parallel() // its own servers
	srvs, clients := quorumOf(t, 3)
	ctx := context.Background()
	holder := newQuorum(t, clients())
	_, unlock := locktest.MustLock(t, holder, ctx, "spin")
	defer func() { _ = unlock() }()
	// Lock returns once a majority answered, so the holder may lack one
	// node already: that one is the free node; else the test frees one.
	node := len(srvs) - 1
	for i, s := range srvs {
		if n, err := s.Client(t).Exists(ctx, "lockkit:{spin}").Result(); err != nil {
			t.Fatal(err)
		} else if n == 0 {
			node = i
		}
	}
	if err := srvs[node].Client(t).Del(ctx, "lockkit:{spin}").Err(); err != nil {
		t.Fatal(err)
	}
	rdbs := clients()
	free := &keyHook{key: "lockkit:{spin}"}
	rdbs[node].AddHook(free)
	_, _, err := newQuorum(t, rdbs).Lock(ctx, "spin", lock.WithMaxWait(2*time.Second))
	if err == nil {
		t.Fatal("obtained a key another Client holds on a majority")
	}
	// An attempt and its release at the start, after the subscription
	// and at the wait limit: a few commands, not one pair per round trip.
	if n := free.commands(); n > 20 {
		t.Fatalf("the waiter sent %d commands to the free node in 2 s while the key was held", n)
	}
}
