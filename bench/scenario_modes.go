package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// A mode is one way to deploy lockkit: what its Client is made on.
type mode struct {
	name string
	// open starts what the mode needs beyond the harness's own server and
	// returns a Client on it whose traffic counts into wc; closing the
	// deployment closes the Client and its Redis clients and stops the
	// servers it started.
	open func(ctx context.Context, e *env, wc *wireCounter) (*deployment, error)
}

// deployment is a Client on the servers of one run.
type deployment struct {
	c       *lock.Client
	clients []redis.UniversalClient
	servers []*server
}

func (d *deployment) close() error {
	var err error
	if d.c != nil {
		err = d.c.Close()
	}
	for _, rdb := range d.clients {
		err = errors.Join(err, rdb.Close())
	}
	stopAll(d.servers)
	return err
}

// lockModes are the modes scenario 6 runs, in this order.
var lockModes = []mode{
	{name: "one redis-server (lock.New)", open: openSingle},
	{name: "Redis Cluster of 3 masters (lock.New on a ClusterClient)", open: openCluster},
	{name: "quorum of 3 redis-servers (lock.NewQuorum)", open: openQuorum(3)},
	{name: "quorum of 5 redis-servers (lock.NewQuorum)", open: openQuorum(5)},
}

// modes is scenario 6: scenario 1's loop, through lockkit alone, in every
// mode. Each mode starts its servers for each run and stops them after.
func modes() []scenario {
	var out []scenario
	for _, m := range lockModes {
		t := newTable("6. Modes, uncontended: one worker, sequential lock + unlock, "+m.name,
			"lockkit only; the other libraries are not run. Round trips and commands are counted on the client's "+
				"sockets, to every node: a lock or unlock in quorum mode sends one script to each master in parallel. "+
				"Allocations are the whole process's, per pair.",
			pairColumns()...,
		)
		out = append(out, scenario{table: t, run: func(ctx context.Context, e *env, lib library) (figures, error) {
			if lib.name != "lockkit" {
				return nil, errNotApplicable
			}
			return runMode(ctx, e, m)
		}})
	}
	return out
}

func runMode(ctx context.Context, e *env, m mode) (f figures, err error) {
	wc := &wireCounter{}
	d, err := m.open(ctx, e, wc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	defer func() { err = errors.Join(err, d.close()) }()
	l := lockkitLocker{c: d.c}
	if _, _, _, err := timePairs(ctx, l, e.key("warm-up"), 0); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	f, _, err = measurePairs(ctx, l, e.key("modes"), e.cfg.run, wc)
	return f, err
}

// openSingle uses the harness's own server, as scenario 1 does.
func openSingle(_ context.Context, e *env, wc *wireCounter) (*deployment, error) {
	rdb := redis.NewClient(&redis.Options{Addr: e.addr, Dialer: wc.dialer()})
	d := &deployment{clients: []redis.UniversalClient{rdb}}
	return d.with(lock.New(rdb, lock.WithDefaultLease(e.cfg.lease)))
}

func openCluster(ctx context.Context, e *env, wc *wireCounter) (*deployment, error) {
	masters, err := startCluster(ctx, e.cfg.redisServer, 3)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs(masters), Dialer: wc.dialer()})
	d := &deployment{clients: []redis.UniversalClient{rdb}, servers: masters}
	return d.with(lock.New(rdb, lock.WithDefaultLease(e.cfg.lease)))
}

// openQuorum returns the opener of a quorum of n independent servers.
func openQuorum(n int) func(context.Context, *env, *wireCounter) (*deployment, error) {
	return func(ctx context.Context, e *env, wc *wireCounter) (*deployment, error) {
		d := &deployment{}
		for range n {
			s, err := startServer(ctx, e.cfg.redisServer)
			if err != nil {
				return nil, errors.Join(err, d.close())
			}
			d.servers = append(d.servers, s)
			d.clients = append(d.clients, redis.NewClient(&redis.Options{Addr: s.addr, Dialer: wc.dialer()}))
		}
		return d.with(lock.NewQuorum(d.clients, lock.WithDefaultLease(e.cfg.lease)))
	}
}

// with completes d with the Client c, or closes d when making c failed.
func (d *deployment) with(c *lock.Client, err error) (*deployment, error) {
	if err != nil {
		return nil, errors.Join(err, d.close())
	}
	d.c = c
	return d, nil
}

func addrs(servers []*server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.addr
	}
	return out
}

func stopAll(servers []*server) {
	for _, s := range servers {
		s.stop()
	}
}

// startCluster starts n redis-servers in cluster mode on free loopback
// ports, joins them as masters without replicas (slots spread evenly) with
// redis-cli --cluster create, and waits until every node reports
// cluster_state:ok. On error it stops what it started.
func startCluster(ctx context.Context, bin string, n int) (masters []*server, err error) {
	defer func() {
		if err != nil {
			stopAll(masters)
		}
	}()
	for range n {
		s, err := startClusterNode(ctx, bin)
		if err != nil {
			return masters, err
		}
		masters = append(masters, s)
	}
	args := append([]string{"--cluster", "create"}, addrs(masters)...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, siblingBinary(bin, "redis-cli"), args...).CombinedOutput(); err != nil {
		return masters, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	for _, s := range masters {
		if err := waitClusterOK(ctx, s.addr, 20*time.Second); err != nil {
			return masters, err
		}
	}
	return masters, nil
}

// startClusterNode starts one cluster-enabled redis-server on a free port
// whose cluster bus port (port + 10000) is free too, trying again on
// another port if the start fails.
func startClusterNode(ctx context.Context, bin string) (*server, error) {
	var err error
	for range 3 {
		var port int
		if port, err = clusterPort(); err != nil {
			return nil, err
		}
		var s *server
		if s, err = launch(ctx, bin, port,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000",
		); err == nil || ctx.Err() != nil {
			return s, err
		}
	}
	return nil, err
}

// clusterPort returns a loopback port that is free, with port + 10000
// free too.
func clusterPort() (int, error) {
	for range 100 {
		p := 20000 + rand.IntN(30000)
		a, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		_ = a.Close()
		if err != nil {
			continue
		}
		_ = b.Close()
		return p, nil
	}
	return 0, errors.New("no free port pair for a cluster node")
}

func waitClusterOK(ctx context.Context, addr string, limit time.Duration) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(limit)
	for {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster node %s not ok after %v: %v\n%s", addr, limit, err, info)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// siblingBinary is name in bin's directory when bin is a path, else name
// (looked up on PATH, as bin is).
func siblingBinary(bin, name string) string {
	if !strings.ContainsRune(bin, filepath.Separator) {
		return name
	}
	return filepath.Dir(bin) + string(filepath.Separator) + name
}
