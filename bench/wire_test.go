package main

import (
	"context"
	"io"
	"net"
	"strconv"
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

func TestRespScannerCountsCommandsSplitAnywhere(t *testing.T) {
	stream := resp(
		[]string{"SET", "k", "v", "PX", "8000", "NX"},
		[]string{"EVALSHA", "0123456789abcdef", "1", "k", "*$\r\n*3\r\n"}, // argument bytes that look like RESP
		[]string{"PING"},
		[]string{"SET", "", ""},
	)
	for split := 0; split <= len(stream); split++ {
		var s respScanner
		got := s.scan(stream[:split]) + s.scan(stream[split:])
		if got != 4 {
			t.Fatalf("split at %d: counted %d commands, want 4", split, got)
		}
	}
	var s respScanner
	var got int64
	for i := range stream {
		got += s.scan(stream[i : i+1])
	}
	if got != 4 {
		t.Fatalf("byte by byte: counted %d commands, want 4", got)
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
	if got.commands != 4 {
		t.Errorf("commands = %d, want 4", got.commands)
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
	if got != (wireCount{commands: 11, roundTrips: 2}) {
		t.Fatalf("counted %+v, want 11 commands in 2 round trips", got)
	}
}
