package lock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Helpers the lock tests share.

// newReal starts a real redis-server for the test (see redistest).
func newReal(t testing.TB) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	return srv, srv.Client(t)
}

var keySeq atomic.Int64

// randKey returns a key no other caller in this process gets.
func randKey() string { return strconv.FormatInt(keySeq.Add(1), 10) }

// queueLen is the number of waiters in key's wait queue in Redis.
func queueLen(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	n, err := rdb.LLen(context.Background(), "lockkit:{"+key+"}:queue").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitQueued waits until key's wait queue in Redis holds n waiters.
func waitQueued(t *testing.T, rdb *redis.Client, key string, n int64) {
	t.Helper()
	locktest.Eventually(t, 5*time.Second, fmt.Sprintf("%d waiters in the wait queue of %q", n, key), func() bool {
		return queueLen(t, rdb, key) == n
	})
}

// slack is what the contract allows a public call past its context's
// deadline.
const slack = 100 * time.Millisecond

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// stalled starts a real Redis, lets setup use it, then freezes it with
// SIGSTOP until the test ends. The go-redis client has default options.
func stalled(t *testing.T, setup func(c *lock.Client, rdb *redis.Client)) (*redistest.Server, *lock.Client) {
	t.Helper()
	srv, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	setup(c, rdb)
	srv.Pause()
	t.Cleanup(srv.Resume) // before the server's own cleanup stops it
	return srv, c
}

// waitSubscribed waits until n Clients listen for hand-offs of key (each
// on its own channel), so a test knows the waiters are asleep.
func waitSubscribed(t *testing.T, rdb *redis.Client, key string, n int) {
	t.Helper()
	locktest.Eventually(t, 5*time.Second, fmt.Sprintf("%d Clients subscribed for %q", n, key), func() bool {
		return subscribers(t, rdb, key) == n
	})
}

// subscribers is the number of Clients listening for hand-offs of key
// (in quorum mode, 1 while any Client listens on the key's channel).
func subscribers(t *testing.T, rdb *redis.Client, key string) int {
	t.Helper()
	chans, err := rdb.PubSubChannels(context.Background(), "lockkit:{"+key+"}:released*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(chans)
}

// lockAsync runs Lock in a goroutine; the returned channel is closed when
// it returned, and *res holds its outcome.
type lockResult struct {
	ctx    context.Context
	unlock lock.UnlockFunc
	err    error
	at     time.Time
}

func lockAsync(c *lock.Client, ctx context.Context, key string, opts ...lock.LockOption) (<-chan struct{}, *lockResult) {
	return async(func() (context.Context, lock.UnlockFunc, error) { return c.Lock(ctx, key, opts...) })
}

// async runs acquire (a Lock, Acquire, RLock … call) on a goroutine; done
// is closed when res has its outcome.
func async(acquire func() (context.Context, lock.UnlockFunc, error)) (done <-chan struct{}, res *lockResult) {
	ch := make(chan struct{})
	res = &lockResult{}
	go func() {
		defer close(ch)
		res.ctx, res.unlock, res.err = acquire()
		res.at = time.Now()
	}()
	return ch, res
}

// acquired waits for the Lock started by lockAsync to return, fails the
// test unless it got the lock, and unlocks it when the test ends.
func acquired(t *testing.T, done <-chan struct{}, res *lockResult, what string) {
	t.Helper()
	locktest.Within(t, done, 5*time.Second, what)
	if res.err != nil {
		t.Fatalf("%s: %v", what, res.err)
	}
	t.Cleanup(func() { _ = res.unlock() })
}
