package main

import (
	"context"
	"errors"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// redsyncLocker is redsync on one go-redis v9 pool with its defaults (32
// tries, a random 50-250 ms between them), but the scenario's lease as the
// mutex expiry (its default, 8 s, in scenarios 1-4).
type redsyncLocker struct {
	rs     *redsync.Redsync
	expiry redsync.Option
	renewals
}

func openRedsync(rdb *redis.Client, lease time.Duration) (locker, error) {
	return &redsyncLocker{
		rs:       redsync.New(goredis.NewPool(rdb)),
		expiry:   redsync.WithExpiry(lease),
		renewals: renewals{every: lease / 3},
	}, nil
}

func (l *redsyncLocker) obtain(ctx context.Context, key string) (*redsync.Mutex, error) {
	m := l.rs.NewMutex(key, l.expiry)
	for {
		err := m.LockContext(ctx)
		if err == nil {
			return m, nil
		}
		// Out of tries: the key is still taken. Keep waiting.
		var taken *redsync.ErrTaken
		if ctx.Err() != nil || !errors.Is(err, redsync.ErrFailed) && !errors.As(err, &taken) {
			return nil, err
		}
	}
}

func (l *redsyncLocker) lock(ctx context.Context, key string) (func() error, error) {
	m, err := l.obtain(ctx, key)
	if err != nil {
		return nil, err
	}
	return func() error { return redsyncUnlock(m) }, nil
}

func redsyncUnlock(m *redsync.Mutex) error {
	ok, err := m.UnlockContext(context.Background())
	switch {
	case errors.Is(err, redsync.ErrLockAlreadyExpired):
		return lostBecause(err)
	case err == nil && !ok:
		return lostBecause(errors.New("redsync: unlock found another owner"))
	}
	return err
}

// lockRenewed extends the mutex every third of its expiry, from a
// goroutine of its own: redsync has no watchdog.
func (l *redsyncLocker) lockRenewed(ctx context.Context, key string) (func() error, error) {
	m, err := l.obtain(ctx, key)
	if err != nil {
		return nil, err
	}
	extend := func(ctx context.Context) error {
		ok, err := m.ExtendContext(ctx)
		if err == nil && !ok {
			err = redsync.ErrExtendFailed
		}
		return err
	}
	return l.keep(extend, func() error { return redsyncUnlock(m) }), nil
}

func (l *redsyncLocker) close() error { return nil }
