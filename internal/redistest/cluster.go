package redistest

import (
	"context"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters without replicas, each its own
// redis-server process.
type Cluster struct {
	Masters []*Server
}

// StartCluster starts n redis-servers in cluster mode on free loopback
// ports, joins them with redis-cli --cluster create (slots spread evenly)
// and waits until every node reports cluster_state:ok. They are stopped
// when the test ends.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	cli := Binary(tb, "redis-cli")
	cl := &Cluster{}
	var addrs []string
	for range n {
		s := &Server{
			tb:   tb,
			bin:  Binary(tb, "redis-server"),
			dir:  tb.TempDir(),
			Port: clusterPort(tb),
			args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"},
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		s.start()
		tb.Cleanup(s.Stop)
		cl.Masters = append(cl.Masters, s)
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, s := range cl.Masters {
		s.waitClusterOK(tb)
	}
	return cl
}

// clusterPort returns a free port whose cluster bus port (port + 10000) is
// free too.
func clusterPort(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		p := 20000 + rand.IntN(30000)
		a, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p
	}
	tb.Fatal("no free port pair for a cluster node")
	return 0
}

func (s *Server) waitClusterOK(tb testing.TB) {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := rdb.ClusterInfo(context.Background()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("cluster node %s not ok: %v\n%s", s.Addr, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Client returns a cluster client of the cluster, closed when the test
// ends.
func (cl *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	var addrs []string
	for _, s := range cl.Masters {
		addrs = append(addrs, s.Addr)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
