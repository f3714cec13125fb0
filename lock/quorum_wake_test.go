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

// lateStart holds back, for d, each command that names key after the
// first such one, before go-redis sends it: a node whose goroutine or
// connection is not ready when the majority has answered.
type lateStart struct {
	key   string
	d     time.Duration
	mu    sync.Mutex
	count int
}

func (h *lateStart) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateStart) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.names(cmd) {
			time.Sleep(h.d)
		}
		return next(ctx, cmd)
	}
}

func (h *lateStart) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// names reports whether cmd names the key and is not the first to.
func (h *lateStart) names(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if a == h.key {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.count++
			return h.count > 1
		}
	}
	return false
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
	rdbs[2].AddHook(&lateStart{key: "lockkit:{slow}", d: 50 * time.Millisecond})
	c := newQuorum(t, rdbs)
	_, unlock := locktest.MustLock(t, c, ctx, "slow")
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	waitReleasedOn(t, srvs[2].Client(t), "lockkit:{slow}", 2*time.Second)
}
