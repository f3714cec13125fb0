package main

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// resp encodes commands as go-redis writes them.
func resp(cmds ...[]string) []byte {
	var b []byte
	for _, c := range cmds {
		b = append(b, '*')
		b = strconv.AppendInt(b, int64(len(c)), 10)
		b = append(b, "\r\n"...)
		for _, a := range c {
			b = append(b, '$')
			b = strconv.AppendInt(b, int64(len(a)), 10)
			b = append(b, "\r\n"...)
			b = append(b, a...)
			b = append(b, "\r\n"...)
		}
	}
	return b
}

// names scans the pieces of a stream and returns the command names seen,
// joined by spaces.
func names(pieces ...[]byte) string {
	var s respScanner
	var got []string
	for _, p := range pieces {
		s.scan(p, func(name []byte) { got = append(got, string(name)) })
	}
	return strings.Join(got, " ")
}

func TestRespScannerReadsNamesSplitAnywhere(t *testing.T) {
	stream := resp(
		[]string{"SET", "k", "v", "PX", "8000", "NX"},
		[]string{"EVALSHA", "0123456789abcdef", "1", "k", "*$\r\n*3\r\n"}, // argument bytes that look like RESP
		[]string{"ping"},
		[]string{"Client", "SetInfo", "lib-name", "go-redis"},
		[]string{"SET", "", ""},
		[]string{strings.Repeat("x", maxName+10)},
	)
	const want = "set evalsha ping client set " + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" // cut at maxName
	for split := 0; split <= len(stream); split++ {
		if got := names(stream[:split], stream[split:]); got != want {
			t.Fatalf("split at %d: read %q, want %q", split, got, want)
		}
	}
	var pieces [][]byte
	for i := range stream {
		pieces = append(pieces, stream[i:i+1])
	}
	if got := names(pieces...); got != want {
		t.Fatalf("byte by byte: read %q, want %q", got, want)
	}
}

func TestWireCountSub(t *testing.T) {
	wc := &wireCounter{}
	wc.count([]byte("evalsha"))
	before := wc.snapshot()
	wc.count([]byte("evalsha"))
	wc.count([]byte("set"))
	wc.count([]byte("evalsha"))
	wc.roundTrips.Add(2)
	d := wc.snapshot().sub(before)
	if d.roundTrips != 2 || d.commands() != 3 || d.sent["evalsha"] != 2 || d.sent["set"] != 1 || len(d.sent) != 2 {
		t.Fatalf("sub = %+v, want 2 round trips, evalsha 2, set 1", d)
	}
	if n := testing.AllocsPerRun(100, func() { wc.count([]byte("evalsha")) }); n != 0 {
		t.Errorf("counting a known command allocates %v times", n)
	}
}

func TestCountingConnCountsRoundTrips(t *testing.T) {
	client, srv := net.Pipe()
	defer srv.Close()
	wc := &wireCounter{}
	c := &countingConn{Conn: client, w: wc}
	defer c.Close()
	go func() { // answer every write burst with one byte
		buf := make([]byte, 4096)
		for {
			if _, err := srv.Read(buf); err != nil {
				return
			}
			if _, err := srv.Write([]byte{'+'}); err != nil {
				return
			}
		}
	}()
	write := func(b []byte) {
		t.Helper()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() {
		t.Helper()
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	write(resp([]string{"PING"}))
	read()
	// A pipeline written in two parts, then read: one round trip.
	p := resp([]string{"GET", "a"}, []string{"GET", "b"}, []string{"GET", "c"})
	write(p[:7])
	read()
	write(p[7:])
	read()
	got := wc.snapshot()
	if got.commands() != 4 || got.sent["get"] != 3 || got.sent["ping"] != 1 {
		t.Errorf("sent %v, want get 3 and ping 1", got.sent)
	}
	if got.roundTrips != 3 {
		t.Errorf("round trips = %d, want 3", got.roundTrips)
	}
}

// TestWireCounterWithGoRedis checks the counter against go-redis's own
// count of what it sent, against a real server when there is one.
func TestWireCounterWithGoRedis(t *testing.T) {
	srv := startTestServer(t)
	wc := &wireCounter{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, Dialer: wc.dialer()})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil { // dials: the handshake counts too
		t.Fatal(err)
	}
	before := wc.snapshot()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range 10 {
			p.Incr(ctx, "n")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := wc.snapshot().sub(before)
	if got.roundTrips != 2 || got.commands() != 11 || got.sent["set"] != 1 || got.sent["incr"] != 10 {
		t.Fatalf("counted %+v, want set 1 and incr 10 in 2 round trips", got)
	}
}
