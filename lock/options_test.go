package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	var nilClient *redis.Client
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}})
	t.Cleanup(func() { _ = ring.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cluster.Close() })
	tests := []struct {
		name string
		rdb  redis.UniversalClient
		opts []lock.Option
		want string
	}{
		{"nil client", nil, nil, "nil Redis client"},
		{"ring", ring, nil, "redis.Ring cannot hold locks"},
		{"typed nil client", nilClient, nil, "nil Redis client"},
		{"zero lease", rdb, []lock.Option{lock.WithDefaultLease(0)}, "lease 0s is shorter"},
		{"negative lease", rdb, []lock.Option{lock.WithDefaultLease(-time.Second)}, "lease -1s is shorter"},
		{"lease too short to renew", rdb, []lock.Option{lock.WithDefaultLease(5 * time.Millisecond)}, "shorter than the minimum"},
		{"empty prefix", rdb, []lock.Option{lock.WithPrefix("")}, "prefix"},
		{"prefix with brace", rdb, []lock.Option{lock.WithPrefix("a{b")}, "prefix"},
		{"no replica to acknowledge", rdb, []lock.Option{lock.WithReplicaAck(0, time.Second)}, "at least 1 replica"},
		{"no time to acknowledge", rdb, []lock.Option{lock.WithReplicaAck(1, 0)}, "timeout of 1 ms or more"},
		{"acknowledgement on a cluster", cluster, []lock.Option{lock.WithReplicaAck(1, time.Second)}, "ClusterClient"},
		{"nil logger", rdb, []lock.Option{lock.WithLogger(nil)}, "nil logger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := lock.New(tt.rdb, tt.opts...)
			if c != nil || !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, %v; want ErrInvalid mentioning %q", c, err, tt.want)
			}
		})
	}
}

func TestLockRejectsBadInput(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	tests := []struct {
		name string
		key  string
		opts []lock.LockOption
		want string
	}{
		{"empty key", "", nil, "empty key"},
		{"oversized key", strings.Repeat("k", lock.MaxKeyLen+1), nil, "longer than the maximum"},
		{"zero lease", "k", []lock.LockOption{lock.WithLease(0)}, "lease 0s"},
		{"negative fixed lease", "k", []lock.LockOption{lock.WithFixedLease(-time.Second)}, "lease -1s"},
		{"short lease", "k", []lock.LockOption{lock.WithLease(time.Millisecond)}, "shorter than the minimum"},
		{"zero wait", "k", []lock.LockOption{lock.WithMaxWait(0)}, "wait limit 0s"},
		{"negative wait", "k", []lock.LockOption{lock.WithMaxWait(-time.Second)}, "wait limit -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, call := range []func(context.Context, string, ...lock.LockOption) (context.Context, lock.UnlockFunc, error){c.Lock, c.TryLock} {
				ctx, unlock, err := call(context.Background(), tt.key, tt.opts...)
				if ctx != nil || unlock != nil || !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v; want ErrInvalid mentioning %q", err, tt.want)
				}
			}
		})
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("bad input wrote to Redis: %v", keys)
	}
}

func TestRedisDown(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	mr.Close()
	_, _, err := c.TryLock(context.Background(), "k")
	if err == nil || errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock with Redis down = %v, want the Redis error", err)
	}
}
