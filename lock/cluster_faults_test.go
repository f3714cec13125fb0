package lock_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Redis Cluster faults: a master down or frozen affects only the locks of
// its slots.

func testMasterDown(t *testing.T, opts func(*redis.ClusterOptions)) {
	const (
		lease     = 1500 * time.Millisecond // renewed every 500 ms
		perMaster = 20
	)
	ctx := context.Background()
	began := time.Now()
	cl := redistest.StartCluster(t, 3)
	t.Logf("cluster up in %v", time.Since(began).Round(time.Millisecond))
	// A cluster without replicas stops serving every slot once the dead
	// master is marked failed (after cluster-node-timeout, 5 s here) unless
	// full coverage is not required; the test is about the Client, not
	// about that Redis setting.
	for _, s := range cl.Masters {
		if err := s.Client(t).ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatal(err)
		}
	}
	var addrs []string
	for _, s := range cl.Masters {
		addrs = append(addrs, s.Addr)
	}
	o := &redis.ClusterOptions{Addrs: addrs}
	opts(o)
	rdb := redis.NewClusterClient(o)
	t.Cleanup(func() {
		_ = rdb.Close()
		waitDialersGone()
	})

	keys := spreadKeys(t, rdb, 3, perMaster)
	masterOf := map[string]string{}
	for _, k := range keys {
		m, err := rdb.MasterForKey(ctx, "lockkit:{"+k+"}")
		if err != nil {
			t.Fatal(err)
		}
		masterOf[k] = m.Options().Addr
	}
	victim := cl.Masters[1]

	c := locktest.NewClient(t, rdb, lock.WithDefaultLease(lease))
	held := map[string]context.Context{}
	unlocks := map[string]lock.UnlockFunc{}
	var mu sync.Mutex
	lostAt := map[string]time.Time{} // when a lock context ended with ErrLost
	for _, k := range keys {
		held[k], unlocks[k] = locktest.MustLock(t, c, ctx, k)
		context.AfterFunc(held[k], func() {
			if errors.Is(context.Cause(held[k]), lock.ErrLost) {
				mu.Lock()
				lostAt[k] = time.Now()
				mu.Unlock()
			}
		})
	}
	t.Cleanup(func() { // also when an assertion failed
		for _, u := range unlocks {
			_ = u()
		}
	})
	t.Logf("%d locks held at %v", len(keys), time.Since(began).Round(time.Millisecond))

	time.Sleep(lease) // a few renewals with every master up
	for _, k := range keys {
		if err := held[k].Err(); err != nil {
			t.Fatalf("%s lost with every master up: %v", k, context.Cause(held[k]))
		}
	}

	pid := redisPID(t, victim)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for { // the port refuses connections once the process is gone
		conn, err := net.DialTimeout("tcp", victim.Addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		conn.Close()
		if time.Since(killed) > 2*time.Second {
			t.Fatalf("master %s still accepts connections 2 s after SIGKILL", victim.Addr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("killed master %s (pid %d)", victim.Addr, pid)

	// Every lock of the dead master is lost within its validity, well
	// before 3 leases.
	limit := killed.Add(3 * lease)
	var deadKeys, liveKeys []string
	var slowest time.Duration
	for _, k := range keys {
		if masterOf[k] != victim.Addr {
			liveKeys = append(liveKeys, k)
			continue
		}
		deadKeys = append(deadKeys, k)
		select {
		case <-held[k].Done():
			slowest = max(slowest, time.Since(killed))
		case <-time.After(time.Until(limit)):
		}
	}
	// The last renewal confirmed before the kill was sent at most one
	// interval before it, so its validity ends less than a lease after.
	if slowest > lease+500*time.Millisecond {
		t.Errorf("a lock of the dead master was lost only %v after the kill, lease %v", slowest, lease)
	}
	time.Sleep(time.Until(limit)) // 3 leases: no lease of the healthy masters lasts that long unrenewed

	perMasterLost := map[string]int{}
	var minPTTL time.Duration = -1
	mu.Lock()
	lostAfter := map[string][2]time.Duration{} // master -> first, last loss after the kill
	for k, at := range lostAt {
		d, seen := lostAfter[masterOf[k]], false
		if d[1] > 0 {
			seen = true
		}
		if !seen || at.Sub(killed) < d[0] {
			d[0] = at.Sub(killed)
		}
		d[1] = max(d[1], at.Sub(killed))
		lostAfter[masterOf[k]] = d
	}
	mu.Unlock()
	for _, k := range deadKeys {
		lctx := held[k]
		if lctx.Err() == nil {
			t.Errorf("%s on the dead master: not lost %v after the kill", k, time.Since(killed))
			continue
		}
		perMasterLost[masterOf[k]]++
		if cause := context.Cause(lctx); !errors.Is(cause, lock.ErrLost) {
			t.Errorf("%s on the dead master: cause %v, want ErrLost", k, cause)
		}
		if lock.Held(lctx, k) {
			t.Errorf("%s on the dead master: Held after loss", k)
		}
	}
	for _, k := range liveKeys {
		lctx := held[k]
		if lctx.Err() != nil {
			perMasterLost[masterOf[k]]++
			t.Errorf("%s on healthy master %s lost: %v", k, masterOf[k], context.Cause(lctx))
			continue
		}
		if !lock.Held(lctx, k) {
			t.Errorf("%s on healthy master %s: Held is false", k, masterOf[k])
		}
		pttl, err := rdb.PTTL(ctx, "lockkit:{"+k+"}").Result()
		if err != nil {
			t.Errorf("PTTL of %s: %v", k, err)
			continue
		}
		if pttl <= 0 {
			t.Errorf("%s on healthy master %s: PTTL %v %v after the kill, want > 0 (renewed)", k, masterOf[k], pttl, time.Since(killed))
		}
		if minPTTL < 0 || pttl < minPTTL {
			minPTTL = pttl
		}
	}
	for _, s := range cl.Masters {
		n := 0
		for _, k := range keys {
			if masterOf[k] == s.Addr {
				n++
			}
		}
		role := "healthy"
		if s == victim {
			role = "killed"
		}
		if d, ok := lostAfter[s.Addr]; ok {
			t.Logf("master %s (%s): %d locks, %d lost, %v to %v after the kill", s.Addr, role, n, perMasterLost[s.Addr],
				d[0].Round(time.Millisecond), d[1].Round(time.Millisecond))
		} else {
			t.Logf("master %s (%s): %d locks, %d lost", s.Addr, role, n, perMasterLost[s.Addr])
		}
	}
	t.Logf("dead master's locks all lost within %v of the kill (lease %v); healthy keys' min PTTL %v at %v after the kill",
		slowest.Round(time.Millisecond), lease, minPTTL, time.Since(killed).Round(time.Millisecond))

	// A lost lock's unlock still tries to release its key (it might be
	// ours still), which on a dead master costs go-redis's retries: unlock
	// concurrently.
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = unlocks[k]()
		}()
	}
	wg.Wait()
	for i, k := range keys {
		switch err := errs[i]; {
		case masterOf[k] == victim.Addr && !errors.Is(err, lock.ErrLost):
			t.Errorf("unlock %s on the dead master: %v, want ErrLost", k, err)
		case masterOf[k] != victim.Addr && err != nil && !t.Failed():
			t.Errorf("unlock %s on healthy master: %v", k, err)
		}
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	t.Logf("unlocked and closed at %v", time.Since(began).Round(time.Millisecond))
}

// waitDialersGone waits, up to 3 s, until no go-redis pool of a closed
// client still probes a dead server: the prober sleeps 1 s between dials
// and only then sees that its pool was closed, which goleak would report.
func waitDialersGone() {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		n := runtime.Stack(buf, true)
		for n == len(buf) {
			buf = make([]byte, 2*len(buf))
			n = runtime.Stack(buf, true)
		}
		if !bytes.Contains(buf[:n], []byte("(*ConnPool).tryDial")) {
			return
		}
	}
}

// redisPID returns the process id of the redis-server s.
func redisPID(t *testing.T, s *redistest.Server) int {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no process_id in INFO of %s", s.Addr)
	return 0
}

// TestClusterMasterDownLosesOnlyItsLocks kills one master of a 3-master
// cluster while one Client holds locks on every master: only the locks the
// dead master served are lost (cause ErrLost); the others stay held and
// their leases are still renewed on the healthy masters. It runs once with
// go-redis's default cluster options and once with short timeouts.
func TestClusterMasterDownLosesOnlyItsLocks(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	for _, tc := range []struct {
		name string
		opts func(*redis.ClusterOptions)
	}{
		{"default options", func(*redis.ClusterOptions) {}},
		{"short timeouts", func(o *redis.ClusterOptions) {
			o.DialTimeout = 250 * time.Millisecond
			o.ReadTimeout = 500 * time.Millisecond
			o.WriteTimeout = 500 * time.Millisecond
			o.MaxRedirects = 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testMasterDown(t, tc.opts)
		})
	}
}

// Redis Cluster with one master frozen: Lock, TryLock and unlock of keys
// on the healthy masters are not slowed down, calls on the frozen master
// keep their deadlines, and Close returns within 1 s.
func TestClusterOneMasterFrozen(t *testing.T) {
	locktest.Timed(t)
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	keys := spreadKeys(t, rdb, 3, 1)
	masterOf := map[string]string{}
	for _, k := range keys {
		m, err := rdb.MasterForKey(context.Background(), "lockkit:{"+k+"}")
		if err != nil {
			t.Fatal(err)
		}
		masterOf[k] = m.Options().Addr
	}
	c, err := lock.New(rdb, lock.WithDefaultLease(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var heldUnlock []lock.UnlockFunc
	for _, k := range keys {
		_, u := locktest.MustLock(t, c, ctx, k)
		heldUnlock = append(heldUnlock, u)
	}
	victim := cl.Masters[0]
	victim.Pause()
	t.Cleanup(victim.Resume)
	for i, k := range keys {
		frozen := masterOf[k] == victim.Addr
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		var err error
		var u lock.UnlockFunc
		took := timed(func() { _, u, err = c.TryLock(cctx, k+"x") })
		cancel()
		if err == nil {
			_ = u()
		}
		ut := timed(func() { err = heldUnlock[i]() })
		t.Logf("%s (frozen master: %v): TryLock %v, unlock %v (%v)", k, frozen, took, ut, err)
		if took > 200*time.Millisecond+locktest.Bound(slack) {
			t.Errorf("TryLock took %v with a 200 ms deadline", took)
		}
		if !frozen && (ut > locktest.Bound(200*time.Millisecond) || err != nil) {
			t.Errorf("unlock of %s on a healthy master: %v after %v", k, err, ut)
		}
		if frozen && ut > time.Second+locktest.Bound(slack) {
			t.Errorf("unlock of %s on the frozen master took %v", k, ut)
		}
	}
	time.Sleep(300 * time.Millisecond)
	took := timed(func() { _ = c.Close() })
	t.Logf("Close with one master frozen: %v", took)
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v with one master frozen", took)
	}
}

// TestHeldClusterMasterStalled: Held on a Redis Cluster with one master
// stalled ends with an error within its context's deadline.
func TestHeldClusterMasterStalled(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		_, unlock := locktest.MustLock(t, c, ctx, k)
		defer unlock()
	}
	cl.Masters[1].Pause()
	defer cl.Masters[1].Resume()
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	var err error
	n := 0
	for _, e := range c.List(cctx, "*") {
		if e != nil {
			err = e
			break
		}
		n++
	}
	if took := time.Since(start); err == nil || took > locktest.Bound(600*time.Millisecond) {
		t.Fatalf("Held with a master stalled: %d listed, %v after %v", n, err, took)
	}
}
