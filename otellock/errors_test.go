package otellock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

func TestErrorType(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	redisErr := rdb.Do(context.Background(), "NO-SUCH-COMMAND").Err() // an error reply
	if redisErr == nil {
		t.Fatal("unknown command succeeded")
	}
	reply := func(msg string) error { // an error reply of a script
		return rdb.Eval(context.Background(), "return redis.error_reply(ARGV[1])", nil, msg).Err()
	}
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route")}
	refused := dialClosedPort(t)
	timeout := readPastDeadline(t)
	closedClient := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	_ = closedClient.Close()
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: empty key", lock.ErrInvalid), "lock.ErrInvalid"},
		{lock.ErrClosed, "lock.ErrClosed"},
		{lock.ErrLost, "lock.ErrLost"},
		{fmt.Errorf(`lock: acquire "k": %w`, context.Canceled), "context.Canceled"},
		{fmt.Errorf(`lock: acquire "k": %w`, context.DeadlineExceeded), "context.DeadlineExceeded"},
		{fmt.Errorf(`lock: acquire "k": %w`, refused), "connection_refused"},
		{fmt.Errorf(`lock: acquire "k": %w`, timeout), "timeout"},
		{fmt.Errorf(`lock: acquire "k": %w`, closedClient.Ping(context.Background()).Err()), "redis.ErrClosed"},
		{fmt.Errorf(`lock: acquire "k": %w`, redis.ErrPoolTimeout), "redis.ErrPoolTimeout"},
		{fmt.Errorf(`lock: acquire "k": %w`, io.EOF), "io.EOF"},
		{fmt.Errorf(`lock: acquire "k": %w`, netErr), "*net.OpError"},
		{fmt.Errorf(`lock: release "k": %w`, redisErr), "ERR"},
		{fmt.Errorf(`lock: release "k": %w`, reply("READONLY You can't write against a read only replica.")), "READONLY"},
		{fmt.Errorf(`lock: release "k": %w`, reply("NOSCRIPT")), "NOSCRIPT"},
		{fmt.Errorf(`lock: release "k": %w`, reply("no code here")), "proto.RedisError"},
		{fmt.Errorf(`lock: release "k": %w`, reply(strings.Repeat("X", 25)+" too long a code")), "proto.RedisError"},
		{fmt.Errorf("lock: %w (maxmemory reached, noeviction): %w", lock.ErrOutOfMemory, reply("OOM command not allowed")), "OOM"},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w%w", netErr, lock.ErrNotObtained)), "*net.OpError"},
		{fmt.Errorf(`lock: acquire "k": %w`, errors.New("unexpected reply [1]")), "_OTHER"},
		{fmt.Errorf(`lock: acquire "k": quorum of 2 not reached: %w`, errors.Join(netErr, redisErr)), "*net.OpError"},
	}
	for _, tt := range tests {
		if got := otellock.ErrorType(tt.err); got != tt.want {
			t.Errorf("error.type of %v (%T) = %q, want %q", tt.err, tt.err, got, tt.want)
		}
	}
}

// dialClosedPort returns the error of a dial to a loopback port that
// nothing listens on.
func dialClosedPort(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	conn, err := net.Dial("tcp", addr)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("dial %s succeeded", addr)
	}
	return err
}

// readPastDeadline returns the error of a read whose deadline passed.
func readPastDeadline(t *testing.T) error {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	_ = a.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := a.Read(make([]byte, 1))
	if err == nil {
		t.Fatal("read past its deadline succeeded")
	}
	return err
}
