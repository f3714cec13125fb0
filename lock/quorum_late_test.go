package lock_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
)

// lagProxy forwards connections to a Redis server. Once lag is called,
// what clients send on the connections made before it reaches the server
// d late; later connections are not slowed.
type lagProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  int           // connections accepted
	slowed int           // the first slowed of them
	d      time.Duration // their lag
}

func startLagProxy(t *testing.T, target string) *lagProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lagProxy{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			p.mu.Lock()
			p.conns++
			n := p.conns
			p.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(client, server); _ = client.Close() }()
			go func() { defer wg.Done(); p.forward(n, client, server) }()
		}
	}()
	return p
}

// forward copies what the n-th client sends to the server, late when n
// was accepted before lag was called.
func (p *lagProxy) forward(n int, client, server net.Conn) {
	defer server.Close()
	buf := make([]byte, 64<<10)
	for {
		k, err := client.Read(buf)
		if k > 0 {
			p.mu.Lock()
			d := p.d
			if n > p.slowed {
				d = 0
			}
			p.mu.Unlock()
			time.Sleep(d)
			if _, err := server.Write(buf[:k]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// lag slows the connections accepted so far by d.
func (p *lagProxy) lag(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slowed, p.d = p.conns, d
}

// TestQuorumLateGrantIsReleased: in quorum mode Lock returns at the
// majority's answer while the last node's command is still on its way.
// An unlock right after reaches that node first (on another connection);
// the node then gives the key to the owner that already let go. It must
// not keep it for a whole lease: with two such nodes no one could get a
// majority until the leases end. (When the slow node's command was not
// sent before Lock returned, it is not sent at all and nothing is late:
// the test tries again, up to 5 times.)
func TestQuorumLateGrantIsReleased(t *testing.T) {
	t.Parallel() // its own servers
	srvs, clients := quorumOf(t, 3)
	ctx := context.Background()
	for try := range 5 {
		rdbs := clients()
		proxy := startLagProxy(t, srvs[2].Addr)
		slow := redis.NewClient(&redis.Options{Addr: proxy.ln.Addr().String()})
		t.Cleanup(func() { _ = slow.Close() })
		rdbs[2] = slow
		c := newQuorum(t, rdbs) // node timeout 200 ms: the slow node still answers
		// The scripts loaded on every node, and one idle connection to
		// the slow node: the one the lock's command will take.
		_, warm := locktest.MustLock(t, c, ctx, "warm")
		if err := warm(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the warm-up's own late commands are done
		proxy.lag(100 * time.Millisecond)
		key := "late" + strconv.Itoa(try)
		_, unlock := locktest.MustLock(t, c, ctx, key)
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		// The slow node runs the lock's command 100 ms late, after the
		// release; once it has, its hash (kept 1 s after a release) tells
		// what happened.
		time.Sleep(500 * time.Millisecond)
		n, err := srvs[2].Client(t).HGet(ctx, "lockkit:{"+key+"}", "n").Result()
		switch {
		case err == redis.Nil:
			continue // no late command: try again
		case err != nil:
			t.Fatal(err)
		case n != "0":
			t.Fatalf("the slow node keeps the key it gave after the unlock (hold count %s), for an owner that let go", n)
		}
		return // granted late, then released
	}
	t.Fatal("in 5 tries the slow node never gave the key late: the test did not make what it checks")
}
