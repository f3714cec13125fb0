package otellock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

func TestErrorType(t *testing.T) {
	_, rdb := newMini(t)
	redisErr := rdb.Do(context.Background(), "NO-SUCH-COMMAND").Err() // an error reply
	if redisErr == nil {
		t.Fatal("unknown command succeeded")
	}
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: empty key", lock.ErrInvalid), "lock.ErrInvalid"},
		{lock.ErrClosed, "lock.ErrClosed"},
		{lock.ErrLost, "lock.ErrLost"},
		{fmt.Errorf(`lock: acquire "k": %w`, context.Canceled), "context.Canceled"},
		{fmt.Errorf(`lock: acquire "k": %w`, context.DeadlineExceeded), "context.DeadlineExceeded"},
		{fmt.Errorf(`lock: acquire "k": %w`, netErr), "*net.OpError"},
		{fmt.Errorf(`lock: release "k": %w`, redisErr), "proto.RedisError"},
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
