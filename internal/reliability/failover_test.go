package reliability_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// sentinelMaster is the name the Sentinel of the failover fault knows
// the locks' primary by.
const sentinelMaster = "locks"

// startSentinel starts a primary, its replica and a Sentinel that
// declares the primary down after 500 ms without an answer. Every worker
// locks through a go-redis failover client of the Sentinel.
func startSentinel(t *testing.T, r *faultRun) []lockRedis {
	// Either may be the primary that a replica syncs from: at once, not
	// after the default 5 s that lets more replicas join a diskless sync.
	noDelay := []string{"--repl-diskless-sync-delay", "0"}
	r.srv = redistest.Start(t, noDelay...)
	r.replica = redistest.StartReplica(t, r.srv, noDelay...)
	r.sentinel = redistest.StartSentinel(t, sentinelMaster, r.srv, 500*time.Millisecond)
	sc := redis.NewSentinelClient(&redis.Options{Addr: r.sentinel.Addr})
	defer sc.Close()
	await(t, 10*time.Second, "the Sentinel sees the replica", func() bool {
		replicas, err := sc.Replicas(context.Background(), sentinelMaster).Result()
		return err == nil && len(replicas) == 1
	})
	return slices.Repeat([]lockRedis{{Sentinel: r.sentinel.Addr, Master: sentinelMaster}}, workers)
}

// injectFailovers asks the Sentinel for a failover while worker 0 is
// inside its long section; once the first ended and the long section is
// over, for another one back as soon as another section is under way,
// and then once more, unless the workers finished. A failover lasts
// until the promoted replica has the old primary as its replica, online:
// until then a write of a lock has no replica to confirm it
// (lock.WithReplicaAck). Each exposes at least the section under way
// when it began; three make the least the fault must reach (two) a
// margin, not what every run measures.
func injectFailovers(t *testing.T, r *faultRun) {
	long := r.awaitLong(t)
	r.failover(t, r.srv, r.replica)
	if !r.sleep(max(200*time.Millisecond, time.Duration(long.Enter+int64(r.long)-now()))) {
		return
	}
	past := strconv.FormatUint(long.Token, 10)
	for _, p := range [][2]*redistest.Server{{r.replica, r.srv}, {r.srv, r.replica}} {
		if !r.awaitHeld(t, p[0], past) {
			return
		}
		r.failover(t, p[0], p[1])
		past = ""
		if !r.sleep(200 * time.Millisecond) {
			return
		}
	}
}

// failover asks the Sentinel to fail over from primary to replica.
func (r *faultRun) failover(t *testing.T, primary, replica *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	sc := redis.NewSentinelClient(&redis.Options{Addr: r.sentinel.Addr})
	defer sc.Close()
	start := now()
	redistest.Failover(t, r.sentinel.Addr, sentinelMaster)
	await(t, 15*time.Second, "the replica promoted", func() bool {
		addr, err := sc.GetMasterAddrByName(ctx, sentinelMaster).Result()
		return err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(replica.Port)
	})
	// The old primary is made a replica of the promoted one, as Sentinel
	// does when it next looks at it, which may be 10 s later.
	if err := primary.Client(t).ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(replica.Port)).Err(); err != nil {
		t.Fatalf("REPLICAOF the promoted replica: %v", err)
	}
	promoted := replica.Client(t)
	await(t, 15*time.Second, "the old primary replicating from the promoted replica", func() bool {
		info, err := promoted.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master") && strings.Contains(info, "state=online")
	})
	r.windows = append(r.windows, window{-1, start, now()})
}

// checkFailover logs what became of the holder during the first
// failover, and requires acquisitions that no replica confirmed: the
// demoted primary ends the WAITs it holds, and the promoted one has no
// replica until the old one syncs from it (10 to 12 acquisitions in each
// of 4 runs), so none means that the Clients did not wait for replicas.
// report.requireSafe has checked that fencing tokens kept growing across
// the failovers.
func checkFailover(t *testing.T, r *faultRun, recs []record) {
	long, next := longSection(t, recs)
	unconfirmed := 0
	for _, rec := range recs {
		if rec.Kind == "error" && strings.Contains(rec.Err, lock.ErrReplicaAck.Error()) {
			unconfirmed++
		}
	}
	if unconfirmed == 0 {
		t.Errorf("no acquisition failed with %q: the Clients did not wait for a replica's confirmation", lock.ErrReplicaAck)
	}
	w := r.windows[0]
	t.Logf("first failover took %s; holder %s; next holder entered %s after the failover began with token %d (holder's %d); %d acquisitions unconfirmed by a replica",
		ms(w.end-w.start), fate(long, w.start), ms(next.Enter-w.start), next.Token, long.Token, unconfirmed)
}

// fate says how a long section ended, relative to the time a fault began.
func fate(long record, start int64) string {
	if long.Lost > 0 {
		return "told of its loss " + ms(long.Lost-start) + " after it began"
	}
	return "kept its lock"
}

// startCluster starts a Redis Cluster of 3 masters, which every worker
// locks through a go-redis cluster client; the fault's Redis is the master
// of the key's slot.
func startCluster(t *testing.T, r *faultRun) []lockRedis {
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	master, err := cl.Client(t).MasterForKey(ctx, faultKey)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, s := range cl.Masters {
		setNodeTimeout(t, s)
		addrs = append(addrs, s.Addr)
		if s.Addr == master.Options().Addr {
			r.srv = s
		}
	}
	if r.srv == nil {
		t.Fatalf("the key's master %s is none of %v", master.Options().Addr, addrs)
	}
	r.restarted = setNodeTimeout
	return slices.Repeat([]lockRedis{{Nodes: addrs, Cluster: true}}, workers)
}

// setNodeTimeout sets a cluster node's node timeout to 2 s, in place of
// redistest's 5 s: a restarted master waits for that long before it
// serves its slots again. 2 s is still more than the master is down in
// restartDelayed, so that the others do not mark it failed.
func setNodeTimeout(t *testing.T, s *redistest.Server) {
	t.Helper()
	if err := s.Client(t).ConfigSet(context.Background(), "cluster-node-timeout", "2000").Err(); err != nil {
		t.Fatal(err)
	}
}

// await polls cond every 20 ms until it holds, or fails t after limit.
func await(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
	}
}
