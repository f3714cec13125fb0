package lock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// spreadKeys returns n keys per master of the cluster, so a test touches
// every master.
func spreadKeys(t *testing.T, rdb *redis.ClusterClient, masters, n int) []string {
	t.Helper()
	ctx := context.Background()
	per := map[string]int{}
	var keys []string
	for i := 0; len(keys) < masters*n; i++ {
		k := "spread:" + strconv.Itoa(i)
		m, err := rdb.MasterForKey(ctx, "lockkit:{"+k+"}")
		if err != nil {
			t.Fatal(err)
		}
		addr := m.Options().Addr
		if per[addr] < n {
			per[addr]++
			keys = append(keys, k)
		}
	}
	if len(per) != masters {
		t.Fatalf("keys reach %d masters, want %d", len(per), masters)
	}
	return keys
}

func TestClusterWakeUpAcrossMasters(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	keys := spreadKeys(t, cl.Client(t), 3, 1)
	holder := locktest.NewClient(t, cl.Client(t))
	waiter := locktest.NewClient(t, cl.Client(t))
	ctx := context.Background()
	var unlocks []lock.UnlockFunc
	var dones []<-chan struct{}
	var results []*lockResult
	for _, k := range keys {
		_, u := locktest.MustLock(t, holder, ctx, k) // 30 s lease: only a message wakes the waiters in time
		unlocks = append(unlocks, u)
		d, r := lockAsync(waiter, ctx, k)
		dones, results = append(dones, d), append(results, r)
	}
	for _, k := range keys { // sharded subscriptions are per master
		waitShardSubscribed(t, cl, "lockkit:{"+k+"}:released")
	}
	for i, u := range unlocks {
		if err := u(); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		within(t, dones[i], 5*time.Second, "waiter on "+keys[i])
		if results[i].err != nil {
			t.Fatal(results[i].err)
		}
		if d := results[i].at.Sub(released); d > 500*time.Millisecond {
			t.Fatalf("waiter on %s acquired %v after the release", keys[i], d)
		}
		_ = results[i].unlock()
	}
}

func waitShardSubscribed(t *testing.T, cl *redistest.Cluster, ch string) {
	t.Helper()
	rdb := cl.Client(t)
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(5 * time.Millisecond) {
		m, err := rdb.PubSubShardNumSub(context.Background(), ch).Result()
		if err == nil && m[ch] == 1 {
			return
		}
	}
	t.Fatalf("no sharded subscriber on %s", ch)
}

func TestClusterWatchdogRenewsOnEveryMaster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	keys := spreadKeys(t, cl.Client(t), 3, 2)
	rec := &recorder{}
	c := locktest.NewClient(t, cl.Client(t), lock.WithDefaultLease(time.Second), lock.WithObserver(rec))
	ctx := context.Background()
	var held []context.Context
	for _, k := range keys {
		lctx, unlock := locktest.MustLock(t, c, ctx, k)
		defer unlock()
		held = append(held, lctx)
	}
	time.Sleep(2500 * time.Millisecond) // two and a half leases
	for i, lctx := range held {
		if lctx.Err() != nil {
			t.Fatalf("%s lost: %v", keys[i], context.Cause(lctx))
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.renewals) < 5 {
		t.Fatalf("%d renewal batches in 2.5 s, want about 7", len(rec.renewals))
	}
	for _, r := range rec.renewals {
		if r.Err != nil || r.Lost != 0 {
			t.Fatalf("renewal %+v", r)
		}
	}
}
