package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// wireCounter counts what go-redis clients send to Redis, at the socket,
// so that nothing a library does escapes it (pub/sub commands included):
// commands are RESP arrays written, tallied by name; a round trip is a
// burst of writes after the connection last read, so a pipeline counts
// once.
type wireCounter struct {
	roundTrips atomic.Int64

	mu   sync.Mutex
	sent map[string]*int64 // commands written by lower-case name; a pointer, so counting does not allocate
}

// wireCount is a snapshot of a wireCounter.
type wireCount struct {
	roundTrips int64
	sent       map[string]int64 // commands by lower-case name, such as "evalsha"
}

// count tallies one command named name (lower case).
func (w *wireCounter) count(name []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n, ok := w.sent[string(name)]; ok {
		*n++
		return
	}
	if w.sent == nil {
		w.sent = make(map[string]*int64)
	}
	one := int64(1)
	w.sent[string(name)] = &one
}

func (w *wireCounter) snapshot() wireCount {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := wireCount{roundTrips: w.roundTrips.Load(), sent: make(map[string]int64, len(w.sent))}
	for name, n := range w.sent {
		c.sent[name] = *n
	}
	return c
}

// commands is how many commands were sent, of every name.
func (a wireCount) commands() int64 {
	var total int64
	for _, n := range a.sent {
		total += n
	}
	return total
}

// names lists the commands sent by name, the most frequent first, as
// "evalsha 2, ping 1".
func (a wireCount) names() string {
	names := slices.Collect(maps.Keys(a.sent))
	slices.SortFunc(names, func(x, y string) int { return cmp.Or(cmp.Compare(a.sent[y], a.sent[x]), cmp.Compare(x, y)) })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, a.sent[n])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// sub returns what was sent between b and a.
func (a wireCount) sub(b wireCount) wireCount {
	d := wireCount{roundTrips: a.roundTrips - b.roundTrips, sent: make(map[string]int64, len(a.sent))}
	for name, n := range a.sent {
		if n -= b.sent[name]; n != 0 {
			d.sent[name] = n
		}
	}
	return d
}

// dialer returns a go-redis Options.Dialer whose connections count into w.
func (w *wireCounter) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 5 * time.Minute}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, w: w}, nil
	}
}

type countingConn struct {
	net.Conn
	w *wireCounter

	mu      sync.Mutex
	writing bool // wrote since the last read
	resp    respScanner
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if !c.writing {
		c.writing = true
		c.w.roundTrips.Add(1)
	}
	c.resp.scan(b, c.w.count)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		c.writing = false
		c.mu.Unlock()
	}
	return n, err
}

// SyscallConn exposes the socket so go-redis runs its usual health check
// on pooled connections, as it does without the counter.
func (c *countingConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("bench: connection has no file descriptor")
	}
	return sc.SyscallConn()
}

// respScanner reads the commands in a stream of RESP requests: arrays of
// bulk strings, as go-redis writes them, split across writes anywhere.
type respScanner struct {
	state respState
	num   int64 // the length being read
	elems int64 // bulk strings left in the current command
	skip  int64 // bytes left in the current bulk string, with its CRLF
	first bool  // the current bulk string is the command's name
	name  [maxName]byte
	nlen  int // bytes of name read, up to maxName
}

// maxName bounds the command names told apart; longer ones are cut.
const maxName = 32

type respState uint8

const (
	respCommand   respState = iota // before a command's '*'
	respArrayLen                   // in "*<n>\r\n"
	respBulkStart                  // before an argument's '$'
	respBulkLen                    // in "$<n>\r\n"
	respBulk                       // in an argument's bytes
)

// scan consumes b and calls command with the name of every command whose
// name ends in it, in lower case (an empty array has the empty name). The
// name is valid only during the call.
func (s *respScanner) scan(b []byte, command func(name []byte)) {
	for i := 0; i < len(b); i++ {
		switch s.state {
		case respCommand:
			if b[i] == '*' {
				s.num, s.state = 0, respArrayLen
			}
		case respBulkStart:
			if b[i] == '$' {
				s.num, s.state = 0, respBulkLen
			}
		case respArrayLen, respBulkLen:
			switch c := b[i]; {
			case c >= '0' && c <= '9':
				s.num = s.num*10 + int64(c-'0')
			case c == '\n':
				s.endLength(command)
			}
		case respBulk:
			n := min(s.skip, int64(len(b)-i))
			if s.first {
				s.keepName(b[i : i+int(min(n, max(s.skip-2, 0)))])
			}
			s.skip -= n
			i += int(n) - 1
			if s.skip == 0 {
				s.endArgument(command)
			}
		}
	}
}

// keepName adds the bytes of a command's name, in lower case.
func (s *respScanner) keepName(b []byte) {
	for _, c := range b {
		if s.nlen == maxName {
			return
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		s.name[s.nlen] = c
		s.nlen++
	}
}

func (s *respScanner) endLength(command func(name []byte)) {
	if s.state == respBulkLen {
		s.skip, s.state = s.num+2, respBulk
		return
	}
	s.elems, s.state = s.num, respBulkStart
	s.first, s.nlen = true, 0
	if s.elems <= 0 {
		s.state = respCommand
		command(nil)
	}
}

func (s *respScanner) endArgument(command func(name []byte)) {
	if s.first {
		s.first = false
		command(s.name[:s.nlen])
	}
	if s.elems--; s.elems > 0 {
		s.state = respBulkStart
		return
	}
	s.state = respCommand
}
