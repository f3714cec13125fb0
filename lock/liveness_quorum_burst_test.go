package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// quorumLockEvery has c, a quorum Client, Lock keys prefix-0 to
// prefix-(n-1) all at once, each waiting until by at most, and returns how
// many it did not get and how long after from it got the last one it did.
// Unlike lockEvery it tries again after an error that is not
// ErrNotObtained: on a busy machine the nodes do not always answer n
// calls at once within c's node timeout, and then Lock returns the error
// (see NewQuorum), which tells nothing of the key.
func quorumLockEvery(t *testing.T, c *lock.Client, prefix string, n int, from, by time.Time) (blocked int, slowest time.Duration) {
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var retried atomic.Int32
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s-%d", prefix, i)
			_, unlock, err := c.Lock(ctx, key)
			for err != nil && !errors.Is(err, lock.ErrNotObtained) && ctx.Err() == nil {
				if retried.Add(1) == 1 {
					t.Logf("%s: %v (tried again)", key, err)
				}
				time.Sleep(10 * time.Millisecond)
				_, unlock, err = c.Lock(ctx, key)
			}
			took := time.Since(from)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				blocked++
				return
			}
			slowest = max(slowest, took)
			_ = unlock()
		}()
	}
	wg.Wait()
	if r := retried.Load(); r > 0 {
		t.Logf("%d Locks tried again after an error", r)
	}
	return blocked, slowest
}

// A burst of 200 quorum TryLocks cut off by their deadlines (nodes 0 and
// 1 answer 10 ms after them, node 2 at once), with node 2 frozen
// throughout or not: the janitor's cleanups need the majority only and
// run together, so another Client gets every key within a claim window of
// the calls' end plus the slack, as
// TestBurstOfCutOffCallsBlocksKeysAtMostAClaimWindow requires on one
// Redis.
//
// Not parallel, with LOCKKIT_TIMING=1 or not: its bursts load the CPU on
// purpose (see TestMain), and the other tests' time bounds must not pay
// for them.
func TestQuorumBurstOfCutOffCallsBlocksKeysAtMostAClaimWindow(t *testing.T) {
	for _, tt := range []struct {
		name   string
		frozen bool
	}{
		{"every node answering", false},
		{"a node frozen", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srvs, clients := quorumOf(t, 3)
			for _, s := range srvs {
				warmScripts(t, s)
			}
			rdbs := clients()
			deadline := locktest.Bound(25 * time.Millisecond) // time for the calls to be sent on a busy machine
			far := &farRedis{d: deadline + 10*time.Millisecond}
			rdbs[0].AddHook(far)
			rdbs[1].AddHook(far)
			c := newQuorum(t, rdbs)
			if tt.frozen {
				srvs[2].Pause()
				t.Cleanup(srvs[2].Resume)
			}
			const n = 200
			cutOffBurst(c, "qburst", n, deadline)
			done := time.Now()
			if far.grants.Load() == 0 {
				t.Fatal("no command took a key: nothing was left to clean up")
			}
			other := newQuorum(t, clients())
			limit := time.Second + locktest.Bound(500*time.Millisecond)
			blocked, slowest := quorumLockEvery(t, other, "qburst", n, done, done.Add(limit))
			t.Logf("%d grants; keys obtained up to %v after the calls ended; %d not within %v", far.grants.Load(), slowest, blocked, limit)
			if blocked > 0 {
				t.Errorf("%d of %d keys still blocked %v after the calls ended", blocked, n, limit)
			}
		})
	}
}
