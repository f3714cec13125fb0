package main

import (
	"context"
	"errors"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// redislockLocker is bsm/redislock retrying every 10 ms
// (redislock.LinearBackoff) while the key is taken; its default is not to
// wait at all.
type redislockLocker struct {
	c     *redislock.Client
	lease time.Duration
	opts  *redislock.Options
	renewals
}

func openRedislock(rdb *redis.Client, lease time.Duration) (locker, error) {
	return &redislockLocker{
		c:        redislock.New(rdb),
		lease:    lease,
		opts:     &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)},
		renewals: renewals{every: lease / 3},
	}, nil
}

func (l *redislockLocker) obtain(ctx context.Context, key string) (*redislock.Lock, error) {
	for {
		lk, err := l.c.Obtain(ctx, key, l.lease, l.opts)
		// Without a deadline in ctx, Obtain stops after one lease. Keep
		// waiting.
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return lk, err
		}
	}
}

func (l *redislockLocker) lock(ctx context.Context, key string) (func() error, error) {
	lk, err := l.obtain(ctx, key)
	if err != nil {
		return nil, err
	}
	return func() error { return redislockRelease(lk) }, nil
}

func redislockRelease(lk *redislock.Lock) error {
	err := lk.Release(context.Background())
	if errors.Is(err, redislock.ErrLockNotHeld) {
		return lostBecause(err)
	}
	return err
}

// lockRenewed refreshes the lock every third of its lease, from a
// goroutine of its own, as the library's users do: it has no watchdog.
func (l *redislockLocker) lockRenewed(ctx context.Context, key string) (func() error, error) {
	lk, err := l.obtain(ctx, key)
	if err != nil {
		return nil, err
	}
	refresh := func(ctx context.Context) error { return lk.Refresh(ctx, l.lease, nil) }
	return l.keep(refresh, func() error { return redislockRelease(lk) }), nil
}

func (l *redislockLocker) close() error { return nil }
