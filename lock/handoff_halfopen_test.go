package lock_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// blackHoleProxy forwards TCP connections to a Redis server and can stop
// forwarding on its pub/sub connections without closing them, as a NAT
// or load balancer that dropped a connection's state does: what either
// side sends on them is read and thrown away, and nobody is told.
// Connections made later are forwarded as usual.
type blackHoleProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  []*proxiedConn
	armed  bool             // black-hole the pub/sub connections after their next delivery
	cut    chan struct{}    // closed when the armed cut happened
	slow   [2]time.Duration // when set, what reaches a client on a pub/sub connection is held back between these
	slowUp time.Duration    // when set, what clients send is held back so long
	wg     sync.WaitGroup
}

// proxiedConn is one client connection through the proxy.
type proxiedConn struct {
	client, server net.Conn
	mu             sync.Mutex
	sub            bool // the client subscribed on it
	dead           bool // black-holed
}

// lateChunk is what reaches a client at a given time.
type lateChunk struct {
	at time.Time
	b  []byte
}

func startBlackHoleProxy(t *testing.T, target string) *blackHoleProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blackHoleProxy{ln: ln, target: target}
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.client.Close()
			_ = c.server.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
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
			c := &proxiedConn{client: client, server: server}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); p.pump(c, client, server, true) }()
			go func() { defer p.wg.Done(); p.pump(c, server, client, false) }()
		}
	}()
	return p
}

func (p *blackHoleProxy) Addr() string { return p.ln.Addr().String() }

// pump copies from src to dst; up tells the client-to-server direction.
func (p *blackHoleProxy) pump(c *proxiedConn, src, dst net.Conn, up bool) {
	defer func() { _ = dst.Close() }()
	var late chan lateChunk // chunks held back, in order (see holdBack)
	defer func() {
		if late != nil {
			close(late)
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c.mu.Lock()
			if up && bytes.Contains(bytes.ToLower(buf[:n]), []byte("subscribe\r\n")) { // the command, not a script's text
				c.sub = true
			}
			dead, sub := c.dead, c.sub
			c.mu.Unlock()
			if d := p.delay(up, sub); !dead && d > 0 {
				late = p.holdBack(late, dst, buf[:n], d)
			} else if !dead {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				if !up && sub {
					p.delivered(c)
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// slowPubSub holds back what reaches clients on pub/sub connections by a
// random delay between lo and hi, in order: a chunk is never delivered
// before the one that came before it.
func (p *blackHoleProxy) slowPubSub(lo, hi time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slow = [2]time.Duration{lo, hi}
}

// slowClients holds back everything clients send by d, in order.
func (p *blackHoleProxy) slowClients(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slowUp = d
}

// delay is how long to hold back a chunk going up (to the server) or
// down on a connection, sub telling a pub/sub one; 0: not at all.
func (p *blackHoleProxy) delay(up, sub bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case up:
		return p.slowUp
	case sub && p.slow[1] > 0:
		lo, hi := p.slow[0], p.slow[1]
		return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
	}
	return 0
}

// holdBack has b delivered to dst d from now, after what was held back
// before it, through late, the queue of its direction of a connection,
// which it makes (with a goroutine that writes in order) when nil.
func (p *blackHoleProxy) holdBack(late chan lateChunk, dst net.Conn, b []byte, d time.Duration) chan lateChunk {
	if late == nil {
		late = make(chan lateChunk, 1<<12)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for ch := range late {
				time.Sleep(time.Until(ch.at))
				if _, err := dst.Write(ch.b); err != nil {
					for range late { // drain until the pump closes it
					}
					return
				}
			}
		}()
	}
	late <- lateChunk{at: time.Now().Add(d), b: bytes.Clone(b)}
	return late
}

// cutAfterNextDelivery black-holes the pub/sub connections right after
// the next reply or message reaches a client on one of them (a
// health-check pong, say: the worst moment, as the next check is then a
// whole period away) and returns a channel closed when that happened.
func (p *blackHoleProxy) cutAfterNextDelivery() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.cut = true, make(chan struct{})
	return p.cut
}

func (p *blackHoleProxy) delivered(from *proxiedConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		return
	}
	p.armed = false
	for _, c := range p.conns {
		c.mu.Lock()
		if c.sub {
			c.dead = true
		}
		c.mu.Unlock()
	}
	close(p.cut)
}

// TestHalfOpenSubscriptionKeepsWaiterPlace ("no wake-up is ever lost",
// FIFO): a waiter's Client reaches Redis through a proxy that stops
// forwarding on the pub/sub connection, without closing it, right after
// something was delivered on it, and the key is released and handed to
// that waiter, whose message is lost: at once, or 1.4 s after the cut,
// once the unanswered health-check PING made every waiter try once. The
// waiter must still get the key within two claim windows of the
// release, and before the waiter queued behind it.
func TestHalfOpenSubscriptionKeepsWaiterPlace(t *testing.T) {
	t.Parallel() // long: waits for the connection to be found dead
	for _, tc := range []struct {
		name  string
		after time.Duration // from the cut to the release
	}{
		{"released at once", 0},
		{"released after the waiters' re-check", 1400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) { halfOpenWaiterKeepsPlace(t, tc.after) })
	}
}

func halfOpenWaiterKeepsPlace(t *testing.T, after time.Duration) {
	srv, admin := newReal(t)
	proxy := startBlackHoleProxy(t, srv.Addr)
	wrdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = wrdb.Close() })
	waiter := locktest.NewClient(t, wrdb)
	holder := locktest.NewClient(t, srv.Client(t))
	behind := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	key := "half-open-place-" + randKey()
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(time.Minute))
	first, firstRes := lockAsync(waiter, ctx, key)
	waitQueued(t, admin, key, 1)
	waitSubscribed(t, admin, key, 1)
	second, secondRes := lockAsync(behind, ctx, key)
	waitQueued(t, admin, key, 2)
	waitSubscribed(t, admin, key, 2)

	// The waiter's pub/sub connection is silent now: the cut comes right
	// after the next thing it delivers (the health check's answer).
	within(t, proxy.cutAfterNextDelivery(), 10*time.Second, "a delivery on the pub/sub connection")
	time.Sleep(after)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	secondFirst := false
	select {
	case <-first:
	case <-second: // the waiter behind went first: let the first one in
		secondFirst = true
		if secondRes.err != nil {
			t.Fatal(secondRes.err)
		}
		t.Errorf("the waiter queued behind got the key first, %v after the release", secondRes.at.Sub(released))
		_ = secondRes.unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("neither waiter got the key within 10 s of the release")
	}
	within(t, first, 10*time.Second, "the waiter on the half-open connection")
	if firstRes.err != nil {
		t.Fatal(firstRes.err)
	}
	took := firstRes.at.Sub(released)
	_ = firstRes.unlock()
	if !secondFirst {
		acquired(t, second, secondRes, "the waiter behind")
	}
	t.Logf("the waiter on the half-open connection got the key %v after the release", took)
	if took > 2*time.Second {
		t.Errorf("the waiter on the half-open connection got the key %v after the release, want within two claim windows (2 s)", took)
	}
}

// TestWaitingCostsOnePingPerClaimWindow ("no polling"): a Client whose 20
// Lock calls wait for 20 held keys, on a healthy connection, sends Redis
// one PING per claim window of silence on its pub/sub connection and no
// other command, whatever the number of waiters.
func TestWaitingCostsOnePingPerClaimWindow(t *testing.T) {
	t.Parallel() // long: waits several claim windows
	srv, admin := newReal(t)
	holder := locktest.NewClient(t, srv.Client(t))
	waiter := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	const n = 20
	for i := range n {
		key := "ping-cost-" + randKey() + "-" + string(rune('a'+i))
		_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(time.Minute))
		done, res := lockAsync(waiter, ctx, key)
		t.Cleanup(func() {
			_ = unlock()
			<-done
			if res.unlock != nil {
				_ = res.unlock()
			}
		})
		waitQueued(t, admin, key, 1)
	}
	time.Sleep(200 * time.Millisecond) // every subscription confirmed, every attempt made
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const watched = 3500 * time.Millisecond
	time.Sleep(watched)
	stats := admin.Info(ctx, "commandstats").Val()
	pings, others := 0, 0
	for _, line := range bytes.Split([]byte(stats), []byte("\n")) {
		name, rest, ok := bytes.Cut(line, []byte(":calls="))
		if !ok {
			continue
		}
		calls := 0
		for _, c := range rest {
			if c < '0' || c > '9' {
				break
			}
			calls = calls*10 + int(c-'0')
		}
		switch string(bytes.TrimPrefix(name, []byte("cmdstat_"))) {
		case "ping":
			pings += calls
		case "info", "config|resetstat":
		default:
			others += calls
		}
	}
	t.Logf("%d waiters, %v: %d PINGs, %d other commands", n, watched, pings, others)
	if pings < 2 || pings > 4 {
		t.Errorf("%d PINGs in %v of waiting, want one per claim window of silence (3)", pings, watched)
	}
	if others > 0 {
		t.Errorf("%d other commands while %d waiters waited for held keys, want none", others, n)
	}
}
