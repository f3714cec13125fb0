package lock_test

import (
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

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
			blocked, slowest := lockEvery(t, other, "qburst", n, done, done.Add(limit), true)
			t.Logf("%d grants; keys obtained up to %v after the calls ended; %d not within %v", far.grants.Load(), slowest, blocked, limit)
			if blocked > 0 {
				t.Errorf("%d of %d keys still blocked %v after the calls ended", blocked, n, limit)
			}
		})
	}
}
