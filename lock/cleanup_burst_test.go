package lock_test

// What calls cut off by their deadlines owe Redis (releasing a key a late
// command took, leaving the queue) is cleaned up by each Client's janitor,
// many cleanups at once: Redis freezing under them delays the keys by at
// most a claim window after it answers again, and Close under them keeps
// its bound and leaves no goroutine.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// cutOffBurst runs n TryLocks of keys prefix-0..n-1 on c, each cut off by
// deadline, and returns when all returned.
func cutOffBurst(c *lock.Client, prefix string, n int, deadline time.Duration) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			if _, unlock, err := c.TryLock(ctx, fmt.Sprintf("%s-%d", prefix, i)); err == nil {
				_ = unlock()
			}
		}()
	}
	wg.Wait()
}

// Close while the janitor runs many cleanups together and Redis is frozen
// under them: Close returns within 1 s, and once rdb is closed (as Close's
// doc says) no goroutine of the Client is left, the sweep's included.
func TestCloseDuringCleanupBurstOnFrozenRedis(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	srv, _ := newReal(t)
	before := goleak.IgnoreCurrent()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	c, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	warm(t, c)
	deadline := locktest.Bound(25 * time.Millisecond)
	far := &farRedis{d: deadline + 10*time.Millisecond}
	rdb.AddHook(far)
	cutOffBurst(c, "sweep-close", 200, deadline)
	if far.grants.Load() == 0 {
		t.Fatal("no command took a key: nothing was left to clean up")
	}
	srv.Pause() // the sweep's cleanups are under way
	t.Cleanup(srv.Resume)
	time.Sleep(100 * time.Millisecond)
	took := timed(func() { _ = c.Close() })
	t.Logf("Close took %v with %d keys taken", took, far.grants.Load())
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v mid-sweep on a frozen Redis", took)
	}
	_ = rdb.Close()
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after Close mid-sweep and rdb.Close: %v", err)
	}
}

// Redis freezes for 600 ms while the janitor runs a burst's cleanups
// together: once it answers again, every key is obtainable by another
// Client within a claim window plus the slack (the freeze ends the
// cleanups under way unconfirmed; the next sweeps must finish the job).
func TestCleanupBurstKeysFreeAfterRedisStall(t *testing.T) {
	locktest.Timed(t)
	srv, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	warm(t, c)
	deadline := locktest.Bound(25 * time.Millisecond)
	far := &farRedis{d: deadline + 10*time.Millisecond}
	rdb.AddHook(far)
	const n = 200
	cutOffBurst(c, "sweep-freeze", n, deadline)
	if far.grants.Load() == 0 {
		t.Fatal("no command took a key: nothing was left to clean up")
	}
	srv.Pause()
	time.Sleep(600 * time.Millisecond)
	srv.Resume()
	resumed := time.Now()
	limit := time.Second + locktest.Bound(500*time.Millisecond)
	other := locktest.NewClient(t, srv.Client(t))
	blocked, _ := lockEvery(t, other, "sweep-freeze", n, resumed, resumed.Add(limit), false)
	if blocked > 0 {
		t.Errorf("%d of %d keys (%d taken by cut-off calls) still blocked %v after Redis resumed", blocked, n, far.grants.Load(), limit)
	}
}
