package main

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// wireCounter counts what go-redis clients send to Redis, at the socket,
// so that nothing a library does escapes it (pub/sub commands included):
// commands are RESP arrays written; a round trip is a burst of writes
// after the connection last read, so a pipeline counts once.
type wireCounter struct {
	commands   atomic.Int64
	roundTrips atomic.Int64
}

// wireCount is a snapshot of a wireCounter.
type wireCount struct{ commands, roundTrips int64 }

func (w *wireCounter) snapshot() wireCount {
	return wireCount{commands: w.commands.Load(), roundTrips: w.roundTrips.Load()}
}

func (a wireCount) sub(b wireCount) wireCount {
	return wireCount{commands: a.commands - b.commands, roundTrips: a.roundTrips - b.roundTrips}
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
	c.w.commands.Add(c.resp.scan(b))
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

// respScanner counts the commands in a stream of RESP requests: arrays of
// bulk strings, as go-redis writes them, split across writes anywhere.
type respScanner struct {
	state respState
	num   int64 // the length being read
	elems int64 // bulk strings left in the current command
	skip  int64 // bytes left in the current bulk string, with its CRLF
}

type respState uint8

const (
	respCommand   respState = iota // before a command's '*'
	respArrayLen                   // in "*<n>\r\n"
	respBulkStart                  // before an argument's '$'
	respBulkLen                    // in "$<n>\r\n"
	respBulk                       // in an argument's bytes
)

// scan consumes b and returns how many commands started in it.
func (s *respScanner) scan(b []byte) int64 {
	var commands int64
	for i := 0; i < len(b); i++ {
		switch s.state {
		case respCommand:
			if b[i] == '*' {
				commands++
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
				s.endLength()
			}
		case respBulk:
			n := min(s.skip, int64(len(b)-i))
			s.skip -= n
			i += int(n) - 1
			if s.skip == 0 {
				s.endArgument()
			}
		}
	}
	return commands
}

func (s *respScanner) endLength() {
	if s.state == respBulkLen {
		s.skip, s.state = s.num+2, respBulk
		return
	}
	s.elems, s.state = s.num, respBulkStart
	if s.elems <= 0 {
		s.state = respCommand
	}
}

func (s *respScanner) endArgument() {
	if s.elems--; s.elems > 0 {
		s.state = respBulkStart
		return
	}
	s.state = respCommand
}
