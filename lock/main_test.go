package lock_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv("LOCKKIT_CHILD_HOLD"); addr != "" {
		holdForever(addr)
		return
	}
	goleak.VerifyTestMain(m)
}

// holdForever is the child process of TestCrashFreesKey: it takes the key
// with a 1 s lease, says so on stdout, and keeps it until it is killed.
func holdForever(addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := lock.New(rdb, lock.WithDefaultLease(time.Second))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if _, _, err := c.Lock(context.Background(), "crash"); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("held")
	select {}
}

// newMini returns a miniredis server and a go-redis client of it, both
// closed when the test ends.
func newMini(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return mr, rdb
}

// newReal starts a real redis-server for the test (see redistest).
func newReal(t testing.TB) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	return srv, srv.Client(t)
}

// newClient returns a lock Client closed when the test ends.
func newClient(t testing.TB, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	c, err := lock.New(rdb, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// mustLock takes key or fails the test.
func mustLock(t testing.TB, l lock.Locker, ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc) {
	t.Helper()
	lctx, unlock, err := l.Lock(ctx, key, opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	return lctx, unlock
}

// within waits up to limit for ch to be closed and reports how long it took.
func within(t testing.TB, ch <-chan struct{}, limit time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("%s: not within %v", what, limit)
		return 0
	}
}

// commandCounter is a go-redis hook counting the commands a client sends
// (a pipeline counts each of its commands).
type commandCounter struct{ n atomic.Int64 }

func countCommands(rdb *redis.Client) *commandCounter {
	cc := &commandCounter{}
	rdb.AddHook(cc)
	return cc
}

func (cc *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (cc *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		cc.n.Add(1)
		return next(ctx, cmd)
	}
}

func (cc *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		cc.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

var keySeq atomic.Int64

// randKey returns a key no other caller in this process gets.
func randKey() string { return strconv.FormatInt(keySeq.Add(1), 10) }
