package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// A locker is one lock library behind the calls every scenario makes.
type locker interface {
	// lock blocks until key is held, for the lease the locker was opened
	// with, or ctx is done; release gives the key back and reports a lock
	// it found gone with errLost. A library that gives up waiting on its
	// own (a retry count, a deadline of its own) is asked again, so lock
	// waits as long as ctx allows.
	lock(ctx context.Context, key string) (release func() error, err error)
	// close releases what the locker itself holds (not the locks).
	close() error
}

// A renewer can keep a held key's lease alive until it is released: the
// library's own watchdog, or the renewal loop its users write.
type renewer interface {
	lockRenewed(ctx context.Context, key string) (release func() error, err error)
}

// A library is one lock library under test, or one way of lockkit's to
// take a key (a row of issue 33's scenarios: Lock, Acquire, RLock).
type library struct {
	name string
	open func(rdb *redis.Client, lease time.Duration) (locker, error)
	// holders is how many may hold one key at once: a semaphore's limit,
	// math.MaxInt for readers; 0 is 1, a lock.
	holders int
}

// most returns how many may hold one key at once.
func (l library) most() int { return max(l.holders, 1) }

// libraries run in this order in every round.
var libraries = []library{
	{name: "lockkit", open: openLockkit},
	{name: "redsync", open: openRedsync},
	{name: "redislock", open: openRedislock},
	{name: "floor", open: openFloor},
}

// errNotApplicable marks a scenario a library has no feature for.
var errNotApplicable = errors.New("bench: not applicable")

// A session is one library opened on its own go-redis client, whose
// traffic counts into a wireCounter.
type session struct {
	locker
	rdb *redis.Client
}

// open opens lib on a new client of the server, counting into wc unless it
// is nil, and takes and releases one key so that scripts are loaded and a
// connection is open before anything is measured. Every library's client
// has go-redis's ContextTimeoutEnabled, the setting lockkit recommends
// (docs/operations.md); the others' calls do not change with it.
func (e *env) open(ctx context.Context, lib library, lease time.Duration, wc *wireCounter) (*session, error) {
	opts := &redis.Options{Addr: e.addr, ContextTimeoutEnabled: true}
	if wc != nil {
		opts.Dialer = wc.dialer()
	}
	rdb := redis.NewClient(opts)
	l, err := lib.open(rdb, lease)
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("%s: open: %w", lib.name, err)
	}
	s := &session{locker: l, rdb: rdb}
	release, err := s.lock(ctx, e.key("warm-up"))
	if err == nil {
		err = release()
	}
	if err != nil {
		_ = s.close()
		return nil, fmt.Errorf("%s: warm-up: %w", lib.name, err)
	}
	return s, nil
}

func (s *session) close() error {
	err := s.locker.close()
	return errors.Join(err, s.rdb.Close())
}

// closeAll closes sessions and joins their errors into *errp.
func closeAll(errp *error, sessions ...*session) {
	for _, s := range sessions {
		*errp = errors.Join(*errp, s.close())
	}
}
