package main

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// lockkitLocker is lockkit with its defaults, but the scenario's lease.
type lockkitLocker struct{ c *lock.Client }

func openLockkit(rdb *redis.Client, lease time.Duration) (locker, error) {
	c, err := lock.New(rdb, lock.WithDefaultLease(lease))
	if err != nil {
		return nil, err
	}
	return lockkitLocker{c: c}, nil
}

func (l lockkitLocker) lock(ctx context.Context, key string) (func() error, error) {
	_, unlock, err := l.c.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	return func() error {
		err := unlock()
		if errors.Is(err, lock.ErrLost) {
			return lostBecause(err)
		}
		return err
	}, nil
}

// lockRenewed is lock: the Client's watchdog renews every held lease.
func (l lockkitLocker) lockRenewed(ctx context.Context, key string) (func() error, error) {
	return l.lock(ctx, key)
}

func (l lockkitLocker) close() error { return l.c.Close() }
