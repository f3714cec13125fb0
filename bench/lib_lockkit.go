package main

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// lockkitLocker is lockkit with its defaults, but the scenario's lease.
// It takes keys with take: Client.Lock when nil.
type lockkitLocker struct {
	c    *lock.Client
	take taking
}

// A taking is a call of lockkit's that takes a key: Lock, Acquire with a
// limit, RLock.
type taking func(c *lock.Client, ctx context.Context, key string) (context.Context, lock.UnlockFunc, error)

func openLockkit(rdb *redis.Client, lease time.Duration) (locker, error) {
	return openTaking(nil)(rdb, lease)
}

// openTaking returns the opener of a lockkit Client whose locker takes
// keys with take (Lock when nil).
func openTaking(take taking) func(rdb *redis.Client, lease time.Duration) (locker, error) {
	return func(rdb *redis.Client, lease time.Duration) (locker, error) {
		c, err := lock.New(rdb, lock.WithDefaultLease(lease))
		if err != nil {
			return nil, err
		}
		return lockkitLocker{c: c, take: take}, nil
	}
}

func (l lockkitLocker) lock(ctx context.Context, key string) (func() error, error) {
	var unlock lock.UnlockFunc
	var err error
	if l.take == nil {
		_, unlock, err = l.c.Lock(ctx, key)
	} else {
		_, unlock, err = l.take(l.c, ctx, key)
	}
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
