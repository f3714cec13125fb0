package lock_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// holdBackProxy forwards connections to a Redis server and holds back the
// first command that names a given key for a while, so that commands sent
// after it on other connections reach the server first.
type holdBackProxy struct {
	ln     net.Listener
	key    []byte
	d      time.Duration
	seen   chan struct{} // closed when the command to hold back is read
	mu     sync.Mutex
	heldAt time.Time // when it went on to the server
}

func startHoldBackProxy(t *testing.T, target, key string, d time.Duration) *holdBackProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdBackProxy{ln: ln, key: []byte(key), d: d, seen: make(chan struct{})}
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
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(client, server); _ = client.Close() }()
			go func() { defer wg.Done(); p.forward(client, server) }()
		}
	}()
	return p
}

// forward copies what a client sends to the server, holding back the
// first command that names the key. (A command comes in one read: they
// are small, and a client sends the next only after the reply.)
func (p *holdBackProxy) forward(client, server net.Conn) {
	defer server.Close()
	buf := make([]byte, 64<<10)
	for {
		k, err := client.Read(buf)
		if k > 0 && bytes.Contains(buf[:k], p.key) && p.first() {
			time.Sleep(p.d)
			p.mu.Lock()
			p.heldAt = time.Now()
			p.mu.Unlock()
		}
		if k > 0 {
			if _, err := server.Write(buf[:k]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// first reports whether this is the first command naming the key.
func (p *holdBackProxy) first() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.seen:
		return false
	default:
		close(p.seen)
		return true
	}
}

// held is when the held-back command went on to the server.
func (p *holdBackProxy) held() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldAt
}

// TestQuorumLateGrantIsReleased: in quorum mode Lock returns at the
// majority's answer while the last node's command may still be on its
// way. The unlock right after reaches that node first (on another
// connection), or is not sent there at all when the majority answers
// before it is on the wire; the node then gives the key to an owner that
// already let go. It must not keep it for a whole lease: with two such
// nodes no one could get a majority until the leases end.
func TestQuorumLateGrantIsReleased(t *testing.T) {
	t.Parallel() // its own servers
	srvs, clients := quorumOf(t, 3)
	ctx := context.Background()
	// The scripts cached on every node: a command that finds a script
	// missing after Lock returned is not sent again, and nothing would be
	// late.
	for _, s := range srvs {
		warmScripts(t, s)
	}
	direct := srvs[2].Client(t)
	for try := range 5 {
		key := "late" + strconv.Itoa(try)
		hashKey := "lockkit:{" + key + "}"
		proxy := startHoldBackProxy(t, srvs[2].Addr, hashKey, 200*time.Millisecond)
		rdbs := clients()
		slow := redis.NewClient(&redis.Options{Addr: proxy.ln.Addr().String(), MinIdleConns: 2})
		t.Cleanup(func() { _ = slow.Close() })
		for slow.PoolStats().IdleConns < 2 { // no dial between Lock's return and its command
			time.Sleep(time.Millisecond)
		}
		rdbs[2] = slow
		// A node timeout far above the hold-back, so that the slow node's
		// late answer is read even on a slow machine.
		c := newQuorum(t, rdbs, lock.WithNodeTimeout(2*time.Second))
		_, unlock := locktest.MustLock(t, c, ctx, key)
		select {
		case <-proxy.seen:
		case <-time.After(time.Second):
			// The majority answered before the slow node's command was
			// on the wire: it was not sent. Try again.
			_ = unlock()
			continue
		}
		unlocking := time.Now()
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		waitReleasedOn(t, direct, hashKey, 3*time.Second)
		if held := proxy.held(); held.After(unlocking) {
			return // the slow node gave the key after the unlock began
		}
	}
	t.Fatal("in 5 tries the slow node never gave the key after the unlock began: the test did not make what it checks")
}

// warmScripts has srv cache the lock's scripts, so that a Client's first
// command there is the script itself, not a NOSCRIPT and its retry.
func warmScripts(t *testing.T, srv *redistest.Server) {
	t.Helper()
	single, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	_, unlock := locktest.MustLock(t, single, context.Background(), "warm")
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}

// waitReleasedOn waits up to limit for the lock hash hashKey on a node to
// have a hold count of 0: its owner released what the node gave it (the
// hash stays 1 s after a release). A count above 0 would stay for the
// whole lease, for an owner that let go.
func waitReleasedOn(t *testing.T, node redis.Cmdable, hashKey string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		n, err := node.HGet(context.Background(), hashKey, "n").Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		if n == "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the unlock a node keeps the key (hold count %q) for an owner that let go", limit, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
