package lock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// lockGoroutines returns, by goroutine header, the stacks of the
// goroutines that run code of package lock (not its tests).
func lockGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "lockkit/lockkit/lock.") && !strings.Contains(g, "_test.go") {
			id, _, _ := strings.Cut(g, " [")
			out[id] = g
		}
	}
	return out
}

// noNewLockGoroutinesWithin fails t when goroutines of package lock that
// were not in before are still there limit after now.
func noNewLockGoroutinesWithin(t *testing.T, before map[string]string, limit time.Duration, what string) {
	t.Helper()
	var left []string
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		left = left[:0]
		for id, g := range lockGoroutines() {
			if _, ok := before[id]; !ok {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
	}
	t.Errorf("%s: %d goroutines of package lock left after %v, first:\n%s", what, len(left), limit, left[0])
}

// TestDeadlinesRightAfterNewOnStalledRedis (guarantee 7, "calls keep their
// deadlines, even when Redis stalls", and New's 50 ms): Redis is frozen
// before New. New returns within 50 ms + 100 ms, Lock and TryLock with a
// 300 ms deadline within it + 100 ms, Close within 1 s; once Close
// returned and rdb is closed, no goroutine of the Client is left.
func TestDeadlinesRightAfterNewOnStalledRedis(t *testing.T) {
	if !locktest.OwnProcessTimed(t) { // checks the goroutines of the whole process
		return
	}
	srv, _ := newReal(t)
	before := lockGoroutines()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	srv.Pause()
	defer srv.Resume()
	var c *lock.Client
	took := timed(func() {
		var err error
		c, err = lock.New(rdb, lock.WithDefaultLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
	})
	if took > 50*time.Millisecond+locktest.Bound(100*time.Millisecond) {
		t.Errorf("New on a stalled Redis took %v, want <= 50 ms + 100 ms", took)
	}
	for _, try := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		call := c.Lock
		if try {
			call = c.TryLock
		}
		var err error
		took := timed(func() { _, _, err = call(ctx, "stalled-new") })
		cancel()
		if err == nil || took > 300*time.Millisecond+locktest.Bound(100*time.Millisecond) {
			t.Errorf("try=%v on a stalled Redis: %v after %v, want an error within 300 ms + 100 ms", try, err, took)
		}
	}
	took = timed(func() { _ = c.Close() })
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close on a stalled Redis took %v, want <= 1 s", took)
	}
	_ = rdb.Close()
	noNewLockGoroutinesWithin(t, before, locktest.Bound(200*time.Millisecond), "after Close and rdb.Close on a stalled Redis")
}

// TestReentryOnStalledRedisKeepsItsBound (guarantee 7, and Lock's doc:
// "the Redis call runs until ctx's deadline + 50 ms or, without a
// deadline, for up to 1 s"): with the key held, Redis freezes and the
// holder re-enters with its live context, with a cancelled copy of it, and
// with a 200 ms deadline. Each call returns within its bound + 100 ms.
func TestReentryOnStalledRedisKeepsItsBound(t *testing.T) {
	locktest.Timed(t)
	srv, rdb := newReal(t)
	c := locktest.NewClient(t, rdb, lock.WithDefaultLease(3*time.Second))
	lctx, _ := locktest.MustLock(t, c, context.Background(), "reenter-stalled")
	srv.Pause()
	defer srv.Resume()
	cancelled, cancel := context.WithCancel(lctx)
	cancel()
	short, cancelShort := context.WithTimeout(lctx, 200*time.Millisecond)
	defer cancelShort()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		bound time.Duration
	}{
		{"live, no deadline", lctx, time.Second},
		{"cancelled", cancelled, time.Second},
		{"200 ms deadline", short, 250 * time.Millisecond},
	} {
		var err error
		took := timed(func() { _, _, err = c.Lock(tc.ctx, "reenter-stalled") })
		if took > tc.bound+locktest.Bound(100*time.Millisecond) {
			t.Errorf("%s: re-entry on a stalled Redis took %v (err %v), want <= %v + 100 ms", tc.name, took, err, tc.bound)
		}
		if err == nil {
			t.Errorf("%s: re-entry on a stalled Redis succeeded", tc.name)
		}
		if errors.Is(err, lock.ErrLost) {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}
