package locktest

import (
	"bytes"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a Redis server and injects the faults
// of the network between a client and Redis, each switched on by a
// method: pub/sub connections that go half-open (what either side sends
// is read and thrown away, and nobody is told, as a NAT that dropped a
// connection's state does), deliveries held back, one command held back
// so that others overtake it, every connection frozen (a partition) and
// thawed with what it held coming late, and one reply lost with its
// connection, or one command lost on a connection gone half-open. It
// stops when the test ends.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu       sync.Mutex
	conns    []*proxiedConn
	armed    bool             // black-hole the pub/sub connections after their next delivery
	cut      chan struct{}    // closed when the armed cut happened
	slow     [2]time.Duration // when set, what reaches a client on a pub/sub connection is held back between these
	slowUp   time.Duration    // when set, what clients send is held back so long
	holdKey  []byte           // when set, the first chunk sent naming it is held back holdFor
	holdFor  time.Duration
	holdSeen chan struct{} // closed when that chunk was read
	heldAt   time.Time     // when the last chunk held back (HoldBackFirst, Freeze) went on to the server
	frozen   *freeze       // while set, nothing is forwarded
	drop     []byte        // when set, the next reply equal to it is dropped
	dropped  chan struct{} // closed when it was
	loseKey  []byte        // when set, the connection of the first chunk sent naming it goes half-open
	lost     chan struct{} // closed when it did
}

// freeze is one Freeze: Thaw sets late, then closes thawed.
type freeze struct {
	thawed chan struct{}
	late   time.Duration // how long what the freeze held waits after the thaw
}

// proxiedConn is one client connection through the proxy.
type proxiedConn struct {
	client, server net.Conn
	mu             sync.Mutex
	sub            bool // the client subscribed on it
	dead           bool // black-holed
}

// lateChunk is what reaches the other side at a given time.
type lateChunk struct {
	at time.Time
	b  []byte
}

// StartProxy starts a Proxy to target on a free loopback port; it
// forwards everything as it comes until a method says otherwise.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	t.Cleanup(func() {
		p.Thaw(0)
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
	go p.accept()
	return p
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
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
}

// Addr is the address clients dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// pump copies from src to dst; up tells the client-to-server direction.
func (p *Proxy) pump(c *proxiedConn, src, dst net.Conn, up bool) {
	defer func() { _ = dst.Close() }()
	var late chan lateChunk // chunks held back, in order (see holdBack)
	defer func() {
		if late != nil {
			close(late)
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.waitThaw() && up {
				p.wentOn()
			}
			if !up && p.drops(buf[:n]) {
				return // the deferred Close cuts the client off; its other pump then ends
			}
			if up {
				p.loseIfFirst(c, buf[:n])
			}
			c.mu.Lock()
			if up && bytes.Contains(bytes.ToLower(buf[:n]), []byte("subscribe\r\n")) { // the command, not a script's text
				c.sub = true
			}
			dead, sub := c.dead, c.sub
			c.mu.Unlock()
			if up {
				p.holdFirst(buf[:n])
			}
			if d := p.delay(up, sub); !dead && d > 0 {
				late = p.holdBack(late, dst, buf[:n], d)
			} else if !dead {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				if !up && sub {
					p.delivered()
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// SlowPubSub holds back what reaches clients on pub/sub connections by a
// random delay between lo and hi, in order: a chunk is never delivered
// before the one that came before it. SlowPubSub(0, 0) ends it.
func (p *Proxy) SlowPubSub(lo, hi time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slow = [2]time.Duration{lo, hi}
}

// SlowClients holds back everything clients send by d, in order.
func (p *Proxy) SlowClients(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slowUp = d
}

// delay is how long to hold back a chunk going up (to the server) or
// down on a connection, sub telling a pub/sub one; 0: not at all.
func (p *Proxy) delay(up, sub bool) time.Duration {
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
func (p *Proxy) holdBack(late chan lateChunk, dst net.Conn, b []byte, d time.Duration) chan lateChunk {
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

// CutPubSubAfterNextDelivery black-holes the pub/sub connections right
// after the next reply or message reaches a client on one of them (a
// health-check pong, say: the worst moment, as the next check is then a
// whole period away) and returns a channel closed when that happened.
func (p *Proxy) CutPubSubAfterNextDelivery() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.cut = true, make(chan struct{})
	return p.cut
}

func (p *Proxy) delivered() {
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

// HoldBackFirst holds back the first command a client sends that names
// key by d, on its connection, so that commands sent after it on other
// connections reach the server first. (A command comes in one read: they
// are small, and a client sends the next only after the reply.) The
// returned channel is closed when that command was read.
func (p *Proxy) HoldBackFirst(key string, d time.Duration) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdKey, p.holdFor, p.holdSeen = []byte(key), d, make(chan struct{})
	return p.holdSeen
}

// HeldBackUntil is when the last chunk that HoldBackFirst or a Freeze
// held back went on to the server; zero before.
func (p *Proxy) HeldBackUntil() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldAt
}

// holdFirst holds b back when it is the first chunk naming the key
// HoldBackFirst set.
func (p *Proxy) holdFirst(b []byte) {
	p.mu.Lock()
	if p.holdKey == nil || !bytes.Contains(b, p.holdKey) {
		p.mu.Unlock()
		return
	}
	d := p.holdFor
	p.holdKey = nil
	close(p.holdSeen)
	p.mu.Unlock()
	time.Sleep(d)
	p.wentOn()
}

// wentOn notes that a chunk held back goes on to the server now.
func (p *Proxy) wentOn() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heldAt = time.Now()
}

// Freeze stops forwarding on every connection, old and new, in both
// directions, and closes none: each is half-open, as behind a network
// partition, until Thaw. A chunk read while frozen is held, and what
// follows it on its connection in its direction waits behind it.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen == nil {
		p.frozen = &freeze{thawed: make(chan struct{})}
	}
}

// Thaw forwards again: what is sent from now on at once, and what the
// freeze held late after now (0: at once), so that what other
// connections send after the thaw reaches the other side first. It does
// nothing unless frozen.
func (p *Proxy) Thaw(late time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.frozen; f != nil {
		f.late = late
		close(f.thawed)
		p.frozen = nil
	}
}

// waitThaw holds the calling pump while the proxy is frozen, and as long
// after the thaw as Thaw says, and reports whether it held it.
func (p *Proxy) waitThaw() bool {
	p.mu.Lock()
	f := p.frozen
	p.mu.Unlock()
	if f == nil {
		return false
	}
	<-f.thawed
	time.Sleep(f.late)
	return true
}

// DropReply drops the next chunk from the server that is exactly reply
// (a reply comes in one read: they are small) and closes its client
// connection, as a network cut would: the command ran, its client never
// learns how. The returned channel is closed when that happened.
func (p *Proxy) DropReply(reply string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop, p.dropped = []byte(reply), make(chan struct{})
	return p.dropped
}

// drops reports whether b, from the server, is the reply DropReply
// drops, then dropped.
func (p *Proxy) drops(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drop == nil || !bytes.Equal(b, p.drop) {
		return false
	}
	p.drop = nil
	close(p.dropped)
	return true
}

// LoseFirst makes the connection of the first command a client sends
// that names key go half-open, as one whose NAT state was dropped: that
// command, and all either side sends on it afterwards, is read and
// thrown away, and nobody is told. The client gets no reply and gives up
// at its deadline; its other connections are left alone. The returned
// channel is closed when that command was read.
func (p *Proxy) LoseFirst(key string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseKey, p.lost = []byte(key), make(chan struct{})
	return p.lost
}

// loseIfFirst black-holes c when b, sent by its client, is the first
// chunk naming the key LoseFirst set.
func (p *Proxy) loseIfFirst(c *proxiedConn, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loseKey == nil || !bytes.Contains(b, p.loseKey) {
		return
	}
	p.loseKey = nil
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	close(p.lost)
}
