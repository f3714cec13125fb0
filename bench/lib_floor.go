package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// floorRetry is how often the floor tries again while the key is taken,
// the same as redislock's backoff here.
const floorRetry = 10 * time.Millisecond

// floorRelease deletes the key only if it still holds the owner's token.
var floorRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0`)

// floorLocker is the least a Redis lock can do: SET NX with a lease to
// take, a compare-and-delete script to release, one round trip each, and a
// retry every floorRetry while waiting. No renewal, no reentrancy, no
// fencing.
type floorLocker struct {
	rdb   *redis.Client
	lease time.Duration
}

func openFloor(rdb *redis.Client, lease time.Duration) (locker, error) {
	return floorLocker{rdb: rdb, lease: lease}, nil
}

func (l floorLocker) lock(ctx context.Context, key string) (func() error, error) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	owner := hex.EncodeToString(b[:])
	var retry *time.Timer
	for {
		ok, err := l.rdb.SetNX(ctx, key, owner, l.lease).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return func() error { return l.release(key, owner) }, nil
		}
		if retry == nil {
			retry = time.NewTimer(floorRetry)
			defer retry.Stop()
		} else {
			retry.Reset(floorRetry)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-retry.C:
		}
	}
}

func (l floorLocker) release(key, owner string) error {
	n, err := floorRelease.Run(context.Background(), l.rdb, []string{key}, owner).Int()
	if err == nil && n == 0 {
		err = lostBecause(errors.New("floor: the key holds another owner or none"))
	}
	return err
}

func (l floorLocker) close() error { return nil }
