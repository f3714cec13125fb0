package lock_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// heldKeys lists the keys Held yields for pattern, sorted, failing the
// test on an error.
func heldKeys(t *testing.T, c *lock.Client, pattern string) []string {
	t.Helper()
	var keys []string
	for info, err := range c.Held(context.Background(), pattern) {
		if err != nil {
			t.Fatalf("Held(%q): %v", pattern, err)
		}
		if !info.Held {
			t.Errorf("Held(%q) yielded %q, not held", pattern, info.Key)
		}
		keys = append(keys, info.Key)
	}
	slices.Sort(keys)
	return keys
}

func TestHeldPatterns(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb, lock.WithOwnerLabel("lister"))
	long := strings.Repeat("x", 200)
	held := []string{"orders:1", "orders:2", "users:1", "a{b}c", "100%", "star*", long}
	for _, k := range held {
		_, unlock := locktest.MustLock(t, c, ctx, k)
		defer unlock()
	}
	_, unlock := locktest.MustLock(t, c, ctx, "released")
	_ = unlock()
	other := locktest.NewClient(t, rdb, lock.WithPrefix("other"))
	_, unlockOther := locktest.MustLock(t, other, ctx, "orders:3")
	defer unlockOther()
	// Plenty of keys for SCAN to take several steps.
	for i := range 1500 {
		rdb.Set(ctx, "lockkit:unrelated:"+itoa(int64(i)), "v", 0)
	}

	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"orders:*", []string{"orders:1", "orders:2"}},
		{"*:1", []string{"orders:1", "users:1"}},
		{"a{b}c", []string{"a{b}c"}},
		{"100%", []string{"100%"}},
		{`star\*`, []string{"star*"}},
		{"released", nil},
		{"*", []string{"", "100%", "a{b}c", "orders:1", "orders:2", "star*", "users:1"}}, // "" is the long key's digest
	} {
		if got := heldKeys(t, c, tc.pattern); !slices.Equal(got, tc.want) {
			t.Errorf("Held(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
	for info, err := range c.Held(ctx, "orders:1") {
		if err != nil || info.Holder.Label != "lister" || info.HoldCount != 1 || info.Token == 0 || info.Node != "" {
			t.Fatalf("Held(orders:1): %+v, %v", info, err)
		}
	}
	// Stopping early stops the scan.
	n := 0
	for range c.Held(ctx, "*") {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("break after %d", n)
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
	for info, err := range c.Held(ctx, "*") {
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

func TestHeldQuorum(t *testing.T) {
	t.Parallel()
	_, clients := quorumOf(t, 3)
	c := newQuorum(t, clients())
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "q:1")
	defer unlock()
	perNode := map[string]int{}
	for info, err := range c.Held(ctx, "q:*") {
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

// TestHeldPatternMatchesEscapedKeys: Held's pattern is a glob over the
// user's keys, although Redis stores '%', '{' and '}' escaped as three
// bytes: '?' and classes match such keys.
func TestHeldPatternMatchesEscapedKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	for _, tc := range []struct{ key, pattern string }{
		{"a%", "a?"},
		{"b{", "b?"},
		{"c}", "c[}]"},
		{"d%", "d[%]"},
	} {
		_, unlock := locktest.MustLock(t, c, ctx, tc.key)
		found := false
		for info, err := range c.Held(ctx, tc.pattern) {
			if err != nil {
				t.Fatalf("Held(%q): %v", tc.pattern, err)
			}
			found = found || info.Key == tc.key
		}
		if !found {
			t.Errorf("Held(%q) does not list the held key %q", tc.pattern, tc.key)
		}
		_ = unlock()
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
	for _, e := range c.Held(cctx, "*") {
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

// TestQuorumHeldWithNodeDown: in quorum mode Held lists the locks of the
// nodes that answer when one does not, then yields that node's error.
func TestQuorumHeldWithNodeDown(t *testing.T) {
	t.Parallel()
	srvs, clients := quorumOf(t, 3)
	ctx := context.Background()
	c := newQuorum(t, clients())
	_, unlock := locktest.MustLock(t, c, ctx, "q")
	defer unlock()
	// Lock returns once a majority has the key: stop the first node that
	// has it, so Held has at least one other node's lock to list.
	info, err := c.Inspect(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	down, held := -1, 0
	for i, n := range info.Nodes {
		if n.Held {
			held++
			if down < 0 {
				down = i
			}
		}
	}
	srvs[down].Stop()
	if info, err := c.Inspect(ctx, "q"); err != nil {
		t.Fatalf("Inspect with a node down: %+v %v", info, err)
	}
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	listed := 0
	var errs []error
	for info, err := range c.Held(hctx, "*") {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if info.Key == "q" {
			listed++
		}
	}
	if listed != held-1 || len(errs) != 1 {
		t.Fatalf("Held with one node of three down listed q on %d nodes (errors %v), want the %d others that have it, then one error", listed, errs, held-1)
	}
}
