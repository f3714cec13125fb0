package lock_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Redis Cluster: exclusion, wake-ups and renewals for keys spread over
// several masters.

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

// waitShardSubscribed waits until one sharded channel matching pattern
// has a subscriber, on any master.
func waitShardSubscribed(t *testing.T, cl *redistest.Cluster, pattern string) {
	t.Helper()
	rdb := cl.Client(t)
	ctx := context.Background()
	locktest.Eventually(t, 5*time.Second, "a sharded subscriber on "+pattern, func() bool {
		var mu sync.Mutex
		n := 0
		_ = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			chans, err := m.PubSubShardChannels(ctx, pattern).Result()
			mu.Lock()
			n += len(chans)
			mu.Unlock()
			return err
		})
		return n == 1
	})
}

// TestClusterMutualExclusion does the same on a 3-master Redis Cluster,
// with keys spread over every master.
func TestClusterMutualExclusion(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	cl := redistest.StartCluster(t, 3)
	data := cl.Client(t)
	var lockers []lock.Locker
	for range 3 {
		lockers = append(lockers, locktest.NewClient(t, cl.Client(t)))
	}
	hammer(t, lockers, data, spreadKeys(t, data, 3, 2), 12, 50)
}

func TestClusterWakeUpAcrossMasters(t *testing.T) {
	t.Parallel() // long and independent: its own servers
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
		waitShardSubscribed(t, cl, "lockkit:{"+k+"}:released:*")
	}
	for i, u := range unlocks {
		if err := u(); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		locktest.Within(t, dones[i], 5*time.Second, "waiter on "+keys[i])
		if results[i].err != nil {
			t.Fatal(results[i].err)
		}
		if d := results[i].at.Sub(released); d > locktest.Bound(500*time.Millisecond) {
			t.Fatalf("waiter on %s acquired %v after the release", keys[i], d)
		}
		_ = results[i].unlock()
	}
}

func TestClusterWatchdogRenewsOnEveryMaster(t *testing.T) {
	t.Parallel() // long and independent: its own servers
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

// On Redis Cluster a release hands the key to a waiter of another Client
// through sharded pub/sub: on keys of every master the waiter starts
// without sending a command (the SPUBLISHed hand-off is understood, not
// merely taken as a wake-up), with a larger token.
// (TestClusterWakeUpAcrossMasters checks only the wake-up's latency.)
func TestClusterHandOffWithoutACommand(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	cl := redistest.StartCluster(t, 3)
	data := cl.Client(t)
	holder := locktest.NewClient(t, cl.Client(t))
	wrdb := cl.Client(t)
	sent := &locktest.CommandCounter{}
	wrdb.AddHook(sent)
	waiter := locktest.NewClient(t, wrdb)
	bg := context.Background()
	for _, key := range spreadKeys(t, data, 3, 1) {
		hctx, unlock := locktest.MustLock(t, holder, bg, key)
		before, _ := lock.FencingToken(hctx, key)
		done, res := lockAsync(waiter, bg, key, lock.WithMaxWait(10*time.Second))
		locktest.Eventually(t, 5*time.Second, "the waiter queued", func() bool { return data.LLen(bg, "lockkit:{"+key+"}:queue").Val() == 1 })
		waitShardSubscribed(t, cl, "lockkit:{"+key+"}:released:*")
		time.Sleep(100 * time.Millisecond) // its attempt after the subscription made
		n := sent.N()
		released := time.Now()
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		locktest.Within(t, done, 3*time.Second, "waiter on "+key)
		if res.err != nil {
			t.Fatalf("%s: %v", key, res.err)
		}
		if d := sent.N() - n; d != 0 {
			t.Errorf("%s: the waiter sent %d commands between the release and holding the key, want 0", key, d)
		}
		if d := res.at.Sub(released); d > locktest.Bound(250*time.Millisecond) {
			t.Errorf("%s: handed over %v after the release, want milliseconds", key, d)
		}
		if tok, ok := lock.FencingToken(res.ctx, key); !ok || tok <= before {
			t.Errorf("%s: token %d (ok %v) after %d", key, tok, ok, before)
		}
		if err := res.unlock(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHeldCluster(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	keys := spreadKeys(t, rdb, 3, 2)
	for _, k := range keys {
		_, unlock := locktest.MustLock(t, c, ctx, k)
		defer unlock()
	}
	slices.Sort(keys)
	if got := heldKeys(t, c, "spread:*"); !slices.Equal(got, keys) {
		t.Fatalf("Held on the cluster = %q, want %q", got, keys)
	}
	nodes := map[string]bool{}
	for info, err := range c.List(ctx, "*") {
		if err != nil {
			t.Fatal(err)
		}
		nodes[info.Node] = true
	}
	if len(nodes) != 3 {
		t.Fatalf("locks listed from %d masters, want 3: %v", len(nodes), nodes)
	}
	info, err := c.Inspect(ctx, keys[0])
	if err != nil || !info.Held {
		t.Fatalf("Inspect on the cluster: %+v, %v", info, err)
	}
	if _, err := c.ForceUnlock(ctx, keys[0]); err != nil {
		t.Fatalf("ForceUnlock on the cluster: %v", err)
	}
	if got := heldKeys(t, c, "spread:*"); len(got) != len(keys)-1 {
		t.Fatalf("after a force-unlock: %q", got)
	}
}

// On Redis Cluster the releasing Client's check (acquire.lua's check
// mode) and the turn it announces with SPUBLISH on every queued Client's
// own channel of the key (a channel that is not in KEYS, in the key's
// slot) reach a live waiter of another Client behind a dead one: it gets
// the key about one claim window after the release, on every master.
func TestClusterCheckAnnouncesTurnAfterDeadReceiver(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	data := cl.Client(t)
	holder := locktest.NewClient(t, cl.Client(t))
	waiter := locktest.NewClient(t, cl.Client(t))
	ctx := context.Background()
	for _, key := range spreadKeys(t, data, 3, 1) {
		_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
		base := "lockkit:{" + key + "}"
		now, err := data.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := data.RPush(ctx, base+":queue", "dead:1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := data.HSet(ctx, base+":waits", "dead:1", now.Add(time.Minute).UnixMilli()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := data.HSet(ctx, base, "q", 1).Err(); err != nil {
			t.Fatal(err)
		}
		done, res := lockAsync(waiter, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
		for data.LLen(ctx, base+":queue").Val() != 2 {
			time.Sleep(2 * time.Millisecond)
		}
		waitShardSubscribed(t, cl, base+":released:*")
		time.Sleep(50 * time.Millisecond)
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		if o, _ := data.HGet(ctx, base, "o").Result(); o != "dead:1" {
			t.Fatalf("%s: not handed to the dead waiter (owner %q)", key, o)
		}
		locktest.Within(t, done, holderLease+5*time.Second, "waiter on "+key)
		if res.err != nil {
			t.Fatalf("%s: %v", key, res.err)
		}
		d := res.at.Sub(released)
		t.Logf("%s: live waiter got the key %v after the release to a dead waiter", key, d)
		if d > 2*time.Second+locktest.Bound(500*time.Millisecond) {
			t.Errorf("%s: live waiter got the key %v after the release to a dead waiter, want within two claim windows", key, d)
		}
		_ = res.unlock()
	}
}
