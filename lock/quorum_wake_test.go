package lock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

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
