package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// requireBinary skips the test without name on PATH, unless
// LOCKKIT_REQUIRE_REDIS=1.
func requireBinary(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("LOCKKIT_REQUIRE_REDIS") == "1" {
			t.Fatalf("%s is required (LOCKKIT_REQUIRE_REDIS=1): %v", name, err)
		}
		t.Skipf("%s not found on PATH", name)
	}
}

func TestStartClusterServesLocksAndStopsByPid(t *testing.T) {
	requireBinary(t, "redis-server")
	requireBinary(t, "redis-cli")
	ctx := context.Background()
	masters, err := startCluster(ctx, "redis-server", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopAll(masters) })

	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs(masters)})
	defer rdb.Close()
	c, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Keys in different slots land on different masters.
	for _, key := range []string{"a", "b", "c", "d", "e", "f"} {
		_, unlock, err := c.Lock(ctx, key)
		if err != nil {
			t.Fatalf("Lock(%q): %v", key, err)
		}
		if err := unlock(); err != nil {
			t.Fatalf("unlock(%q): %v", key, err)
		}
	}
	nodes, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(nodes, "master"); n != 3 {
		t.Errorf("CLUSTER NODES lists %d masters, want 3:\n%s", n, nodes)
	}

	stopAll(masters)
	for _, s := range masters {
		select {
		case <-s.exit:
		default:
			t.Errorf("cluster node %s still running after stop", s.addr)
		}
		if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
			t.Errorf("directory %s left behind (%v)", s.dir, err)
		}
	}
}

func TestModesCountOneRoundTripPerNodeAndCall(t *testing.T) {
	requireBinary(t, "redis-cli")
	s := startTestServer(t)
	admin := redis.NewClient(&redis.Options{Addr: s.addr})
	defer admin.Close()
	e := &env{addr: s.addr, admin: admin, cfg: config{
		run:         100 * time.Millisecond,
		lease:       8 * time.Second,
		redisServer: "redis-server",
	}}
	// A lock or unlock is one script on each master the key is written to:
	// one of the cluster's, every one of a quorum. A quorum call returns at
	// the majority's answer, so the last node's connection may still be
	// busy when the next call comes: now and then a new connection is
	// dialled (its handshake counts), up to 3% more. And a node that gives
	// the key only after the unlock's release was sent releases it again:
	// at most one round trip more per node a call does not wait for.
	want := map[string]float64{
		lockModes[0].name: 2,
		lockModes[1].name: 2,
		lockModes[2].name: 6,
		lockModes[3].name: 10,
	}
	late := map[string]float64{lockModes[2].name: 1, lockModes[3].name: 2}
	// A loaded machine keeps a quorum's last connection busy more often,
	// and dials more: a looser bound unless LOCKKIT_TIMING=1 (as in CI).
	dials := 1.03
	if os.Getenv("LOCKKIT_TIMING") != "1" {
		dials = 1.25
	}
	if len(lockModes) != len(want) {
		t.Fatalf("%d modes, %d expectations: update this test", len(lockModes), len(want))
	}
	for _, m := range lockModes {
		e.runs++
		f, err := runMode(context.Background(), e, m)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if got := f[colRoundTrips]; got < want[m.name]-0.05 || got > want[m.name]*dials+late[m.name] {
			t.Errorf("%s: %.2f round trips/pair, want %.0f", m.name, got, want[m.name])
		}
		if f[colPairsPerSec] <= 0 || f["lock50"] <= 0 || f["unlock99"] < f["unlock50"] {
			t.Errorf("%s: implausible figures %v", m.name, f)
		}
	}
}

func TestSmokeAddsModesOnlyWhenScenariosNotGiven(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"-smoke"}, true},
		{[]string{"-smoke", "-scenarios", "1"}, false},
		{[]string{"-scenarios", "6"}, true},
	} {
		cfg, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("parseFlags(%q): %v", tc.args, err)
		}
		if cfg.scenarios[6] != tc.want {
			t.Errorf("parseFlags(%q): scenario 6 selected = %v, want %v", tc.args, cfg.scenarios[6], tc.want)
		}
	}
}

func TestSiblingBinary(t *testing.T) {
	for _, tc := range []struct{ bin, want string }{
		{"redis-server", "redis-cli"},
		{"/opt/redis/bin/redis-server", "/opt/redis/bin/redis-cli"},
		{"./redis-server", "./redis-cli"},
	} {
		if got := siblingBinary(tc.bin, "redis-cli"); got != tc.want {
			t.Errorf("siblingBinary(%q) = %q, want %q", tc.bin, got, tc.want)
		}
	}
}
