package locktest

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line; it stops when the
// test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// dial connects to the proxy; the connection closes when the test ends.
func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip sends line and reads the answer, failing after limit.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string, limit time.Duration) (string, error) {
	t.Helper()
	if _, err := c.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(limit))
	return r.ReadString('\n')
}

func TestProxyForwards(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, echoServer(t))
	c, r := dial(t, p)
	if got, err := roundTrip(t, c, r, "ping\r\n", time.Second); err != nil || got != "ping\r\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
}

func TestProxyHoldsBackFirstCommandNamingKey(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, echoServer(t))
	seen := p.HoldBackFirst("k1", 100*time.Millisecond)
	c, r := dial(t, p)
	start := time.Now()
	if got, err := roundTrip(t, c, r, "get k1\r\n", time.Second); err != nil || got != "get k1\r\n" {
		t.Fatalf("held-back command: %q, %v", got, err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("the first command naming the key went on after %v, want 100 ms", d)
	}
	Within(t, seen, time.Second, "the held-back command seen")
	if p.HeldBackUntil().IsZero() {
		t.Fatal("HeldBackUntil zero after the command went on")
	}
	start = time.Now()
	if _, err := roundTrip(t, c, r, "get k1\r\n", time.Second); err != nil || time.Since(start) >= 100*time.Millisecond {
		t.Fatalf("the second command naming the key: %v after %v, want no hold-back", err, time.Since(start))
	}
}

func TestProxyCutsPubSubAfterNextDelivery(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, echoServer(t))
	sub, subr := dial(t, p)
	plain, plainr := dial(t, p)
	cut := p.CutPubSubAfterNextDelivery()
	if _, err := roundTrip(t, sub, subr, "subscribe\r\n", time.Second); err != nil {
		t.Fatal(err)
	}
	Within(t, cut, time.Second, "the cut after a delivery")
	if got, err := roundTrip(t, sub, subr, "ping\r\n", 100*time.Millisecond); err == nil {
		t.Fatalf("the cut pub/sub connection still answers: %q", got)
	}
	if got, err := roundTrip(t, plain, plainr, "ping\r\n", time.Second); err != nil || got != "ping\r\n" {
		t.Fatalf("a connection without pub/sub after the cut: %q, %v", got, err)
	}
}

// readLine reads the next answer on a connection, failing after limit.
func readLine(c net.Conn, r *bufio.Reader, limit time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(limit))
	return r.ReadString('\n')
}

func TestProxyFreezeHoldsUntilThawAndLetsOthersOvertake(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, echoServer(t))
	held, heldr := dial(t, p)
	p.Freeze()
	if got, err := roundTrip(t, held, heldr, "held\r\n", 100*time.Millisecond); err == nil {
		t.Fatalf("an answer through the frozen proxy: %q", got)
	}
	other, otherr := dial(t, p)
	if got, err := roundTrip(t, other, otherr, "new\r\n", 100*time.Millisecond); err == nil {
		t.Fatalf("an answer on a connection made while frozen: %q", got)
	}
	if !p.HeldBackUntil().IsZero() {
		t.Fatal("HeldBackUntil set while frozen")
	}
	const late = 300 * time.Millisecond
	thawed := time.Now()
	p.Thaw(late)
	fresh, freshr := dial(t, p)
	if got, err := roundTrip(t, fresh, freshr, "ping\r\n", late/2); err != nil || got != "ping\r\n" {
		t.Fatalf("a command sent after the thaw: %q, %v, want it first", got, err)
	}
	for _, c := range []struct {
		conn net.Conn
		r    *bufio.Reader
		want string
	}{{held, heldr, "held\r\n"}, {other, otherr, "new\r\n"}} {
		if got, err := readLine(c.conn, c.r, Bound(2*time.Second)); err != nil || got != c.want {
			t.Fatalf("held through the freeze: %q, %v, want %q", got, err, c.want)
		}
	}
	if d := time.Since(thawed); d < late {
		t.Fatalf("what the freeze held arrived %v after the thaw, want %v later", d, late)
	}
	if at := p.HeldBackUntil(); at.Sub(thawed) < late {
		t.Fatalf("HeldBackUntil %v after the thaw, want %v", at.Sub(thawed), late)
	}
	if got, err := roundTrip(t, held, heldr, "again\r\n", time.Second); err != nil || got != "again\r\n" {
		t.Fatalf("after the thaw: %q, %v", got, err)
	}
}

func TestProxyDropsOneReplyAndCutsItsConnection(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, echoServer(t))
	dropped := p.DropReply("b\r\n")
	c, r := dial(t, p)
	if got, err := roundTrip(t, c, r, "a\r\n", time.Second); err != nil || got != "a\r\n" {
		t.Fatalf("another reply: %q, %v", got, err)
	}
	if got, err := roundTrip(t, c, r, "b\r\n", time.Second); err == nil {
		t.Fatalf("the dropped reply arrived: %q", got)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection of the dropped reply stays open: %v", err)
	}
	Within(t, dropped, time.Second, "the reply dropped")
	c2, r2 := dial(t, p)
	if got, err := roundTrip(t, c2, r2, "b\r\n", time.Second); err != nil || got != "b\r\n" {
		t.Fatalf("the same reply again: %q, %v, want it forwarded", got, err)
	}
}

func TestProxyLosesFirstCommandNamingKeyAndItsConnection(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, echoServer(t))
	other, ro := dial(t, p)
	if _, err := roundTrip(t, other, ro, "get k0\r\n", time.Second); err != nil {
		t.Fatal(err)
	}
	lost := p.LoseFirst("k1")
	c, r := dial(t, p)
	if got, err := roundTrip(t, c, r, "get k1\r\n", 200*time.Millisecond); err == nil {
		t.Fatalf("the first command naming the key got %q, want no answer", got)
	}
	Within(t, lost, time.Second, "the lost command seen")
	if got, err := roundTrip(t, c, r, "get k2\r\n", 200*time.Millisecond); err == nil {
		t.Fatalf("a later command on the half-open connection got %q, want no answer", got)
	}
	if got, err := roundTrip(t, other, ro, "get k1\r\n", time.Second); err != nil || got != "get k1\r\n" {
		t.Fatalf("another connection naming the key: %q, %v; want it forwarded", got, err)
	}
}
