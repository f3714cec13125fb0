package lock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Quorum mode with a node frozen (SIGSTOP): what the calls left on it
// while it was silent does not keep a key once it answers again.

// holdCountOn returns the hold count of the lock hash hashKey on node, ""
// when there is none.
func holdCountOn(t *testing.T, node redis.Cmdable, hashKey string) string {
	t.Helper()
	n, err := node.HGet(context.Background(), hashKey, "n").Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return n
}

// A released key is obtainable soon after a frozen node resumes. Node 2
// of 3 is frozen for 5 s, longer than go-redis waits for a reply (3 s),
// while calls return on the majority's answer: the node runs what it was
// sent when it resumes, in no set order, the owner's acquisition too,
// after its release. The janitor releases the owner there until the node
// confirmed it twice, so that once node 0 is stopped another Client gets
// every key from nodes 1 and 2 within a few seconds of the resume, not
// when the lease (30 s) the late acquisition set ends.
func TestQuorumFrozenNodeKeepsNoReleasedKey(t *testing.T) {
	t.Parallel() // its own servers
	const freeze = 5 * time.Second
	cutOff := locktest.Bound(25 * time.Millisecond) // time for the calls to be sent on a busy machine
	tests := []struct {
		name string
		keys int
		// far: nodes 0 and 1 answer 10 ms after the calls' deadline, so
		// that their commands take the keys and the janitor releases
		// them on the majority while node 2 holds the commands.
		far bool
		// run takes keys prefix-0 .. prefix-(keys-1) on c and lets go of
		// them while node 2 is frozen.
		run func(t *testing.T, c *lock.Client, prefix string)
	}{
		{
			name: "unlock returned on the majority",
			keys: 1,
			run: func(t *testing.T, c *lock.Client, prefix string) {
				_, unlock := locktest.MustLock(t, c, context.Background(), prefix+"-0")
				if err := unlock(); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "calls cut off by their deadlines",
			keys: 32,
			far:  true,
			run: func(t *testing.T, c *lock.Client, prefix string) {
				cutOffBurst(c, prefix, 32, cutOff)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			t.Cleanup(waitDialersGone) // last: node 0 is stopped, and its clients' dialers end after they are closed
			srvs, clients := quorumOf(t, 3)
			for _, s := range srvs {
				warmScripts(t, s)
			}
			rdbs := clients()
			far := &farRedis{d: cutOff + 10*time.Millisecond}
			if tt.far {
				rdbs[0].AddHook(far)
				rdbs[1].AddHook(far)
			}
			// Made before the freeze, so that node 2 has connections
			// from before it and from during it: when it resumes, their
			// commands run in no set order.
			c := newQuorum(t, rdbs)
			srvs[2].Pause()
			t.Cleanup(srvs[2].Resume)
			tt.run(t, c, "frozen")
			taken := tt.keys
			if tt.far {
				taken = int(far.grants.Load())
			}
			if taken == 0 {
				t.Fatal("no command took a key: nothing was left to release")
			}
			time.Sleep(freeze)
			srvs[2].Resume()
			resumed := time.Now()
			srvs[0].Stop()
			// The janitor's calls to node 2 wait out its back-off after
			// repeated failures (1 s) and the second release (250 ms
			// after the first): 2 s on an idle machine.
			limit := locktest.Bound(2 * time.Second)
			other := newQuorum(t, clients())
			blocked, slowest := lockEvery(t, other, "frozen", tt.keys, resumed, resumed.Add(limit), true)
			direct := srvs[2].Client(t)
			held := 0
			for i := range tt.keys {
				if n := holdCountOn(t, direct, "lockkit:{frozen-"+strconv.Itoa(i)+"}"); n != "" && n != "0" {
					held++
				}
			}
			t.Logf("%d taken on the majority; keys obtained up to %v after the resume, %d not within %v; %d held on node 2 then",
				taken, slowest.Round(time.Millisecond), blocked, limit, held)
			if blocked > 0 {
				t.Errorf("with node 0 stopped, %d of %d keys not obtainable within %v of node 2's resume (%d held there for owners that let go)",
					blocked, tt.keys, limit, held)
			}
		})
	}
}

// Close does not wait for releases owed to a node that stays silent: its
// majority confirmed them. With node 0 stopped (go-redis waits out each
// call's deadline there, as with a frozen node), 30 Lock and unlock
// pairs leave one owed release each, and Close still returns at once
// instead of asking node 0 again until its deadline (1 s).
func TestQuorumCloseDoesNotWaitForOwedReleases(t *testing.T) {
	locktest.Timed(t)
	t.Cleanup(waitDialersGone) // last: node 0 is stopped, and its clients' dialers end after they are closed
	srvs, clients := quorumOf(t, 3)
	for _, s := range srvs {
		warmScripts(t, s)
	}
	c := newQuorum(t, clients())
	srvs[0].Stop()
	for i := range 30 {
		_, unlock := locktest.MustLock(t, c, context.Background(), "owed-"+strconv.Itoa(i))
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("Close took %v", took)
	if limit := locktest.Bound(300 * time.Millisecond); took > limit {
		t.Errorf("Close took %v (> %v) with releases owed to a stopped node", took, limit)
	}
}
