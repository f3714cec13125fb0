package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

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

func TestWaitersOfManyClientsTakeTurnsInArrivalOrder(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder, ctx, "fifo")

	// Four waiters, each with a Client and a Redis client of its own, as
	// four processes would have; each starts once the one before is queued.
	const n = 4
	type waiter struct {
		cc   *locktest.CommandCounter
		done <-chan struct{}
		res  *lockResult
	}
	ws := make([]waiter, n)
	for i := range ws {
		wrdb := srv.Client(t)
		ws[i].cc = locktest.CountCommands(wrdb)
		done, res := lockAsync(locktest.NewClient(t, wrdb), ctx, "fifo")
		ws[i].done, ws[i].res = done, res
		waitQueued(t, rdb, "fifo", int64(i+1))
	}
	waitSubscribed(t, rdb, "fifo", n)

	start := time.Now()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws { // each releases at once, handing over to the next
		locktest.Within(t, w.done, 5*time.Second, fmt.Sprintf("waiter %d", i))
		if w.res.err != nil {
			t.Fatalf("waiter %d: %v", i, w.res.err)
		}
		for _, other := range ws[i+1:] {
			select {
			case <-other.done:
				t.Fatalf("a later waiter got the lock before waiter %d released it", i)
			default:
			}
		}
		if err := w.res.unlock(); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	// Each waiter ran four scripts: a first attempt, one more once
	// subscribed, one on its turn, and its unlock. A release wakes only the waiter whose turn
	// it is; the others may check once per claim window (1 s) that the
	// turn was taken, so a slow run allows one more per second.
	limit := 4 + int64(elapsed/time.Second)
	for i, w := range ws {
		if got := w.cc.Scripts(); got > limit {
			t.Errorf("waiter %d ran %d scripts in %v, want at most %d", i, got, elapsed, limit)
		}
	}
	if q := queueLen(t, rdb, "fifo"); q != 0 {
		t.Errorf("%d waiters left in the queue", q)
	}
}

// queueDeadWaiter puts owner first in key's wait queue with a deadline a
// minute away, as a waiter whose process then died would leave it.
func queueDeadWaiter(t *testing.T, rdb *redis.Client, key, owner string) {
	t.Helper()
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	base := "lockkit:{" + key + "}"
	if err := rdb.RPush(ctx, base+":queue", owner).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, base+":waits", owner, now.Add(time.Minute).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, base, "q", 1).Err(); err != nil { // the lock is held: its hash has a TTL
		t.Fatal(err)
	}
}

func TestTurnOfVanishedWaiterPassesAfterClaimWindow(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	_, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder, ctx, "gone")
	queueDeadWaiter(t, rdb, "gone", "dead:1")
	done, res := lockAsync(waiter, ctx, "gone")
	waitQueued(t, rdb, "gone", 2)
	waitSubscribed(t, rdb, "gone", 1)

	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	// The lock is free but kept for dead:1, whose turn it is.
	_, _, err := holder.TryLock(ctx, "gone")
	var ne *lock.NotObtainedError
	if !errors.As(err, &ne) || ne.RemainingLease <= 0 || ne.RemainingLease > time.Second {
		t.Fatalf("TryLock during another waiter's turn = %v, want ErrNotObtained with at most the 1 s claim window left", err)
	}
	acquired(t, done, res, "waiter behind a vanished one")
	d := res.at.Sub(released)
	t.Logf("waiter acquired %v after the release", d)
	if d < 900*time.Millisecond {
		t.Fatalf("waiter acquired %v after the release, within the vanished waiter's 1 s turn", d)
	}
	if q := queueLen(t, rdb, "gone"); q != 0 {
		t.Errorf("%d waiters left in the queue", q)
	}
}

func TestWaiterThatGivesUpPassesItsTurnAtOnce(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder, ctx, "quit")

	quitter := locktest.NewClient(t, rdb)
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	qdone, qres := lockAsync(quitter, qctx, "quit")
	waitQueued(t, rdb, "quit", 1)
	done, res := lockAsync(locktest.NewClient(t, rdb), ctx, "quit")
	waitQueued(t, rdb, "quit", 2)

	cancel()
	locktest.Within(t, qdone, 5*time.Second, "cancelled waiter")
	if !errors.Is(qres.err, context.Canceled) {
		t.Fatalf("cancelled waiter = %v, want context.Canceled", qres.err)
	}
	if q := queueLen(t, rdb, "quit"); q != 1 {
		t.Fatalf("queue holds %d waiters after one gave up, want 1", q)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	acquired(t, done, res, "remaining waiter")
	// Far below the claim window: nothing waited for the quitter's turn.
	if d := res.at.Sub(released); d > locktest.Bound(500*time.Millisecond) {
		t.Fatalf("remaining waiter acquired %v after the release", d)
	}
}

func TestTryLockDoesNotQueue(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "try")
	defer unlock()
	if _, _, err := c.TryLock(ctx, "try"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock of a held key = %v, want ErrNotObtained", err)
	}
	if q := queueLen(t, rdb, "try"); q != 0 {
		t.Fatalf("TryLock left %d waiters in the queue", q)
	}

	// A waiter's entry lapses by itself if the waiter vanishes: the queue
	// keys carry a TTL. One that gives up takes its entry out at once.
	wctx, cancel := context.WithCancel(ctx)
	done, res := lockAsync(c, wctx, "try")
	waitQueued(t, rdb, "try", 1)
	for _, k := range []string{"lockkit:{try}:queue", "lockkit:{try}:waits"} {
		if ttl := mr.TTL(k); ttl <= 0 {
			t.Errorf("%s has no TTL", k)
		}
	}
	cancel()
	locktest.Within(t, done, 5*time.Second, "cancelled waiter")
	if !errors.Is(res.err, context.Canceled) {
		t.Fatalf("cancelled waiter = %v, want context.Canceled", res.err)
	}
	for _, k := range []string{"lockkit:{try}:queue", "lockkit:{try}:waits"} {
		if mr.Exists(k) {
			t.Errorf("%s left after the only waiter gave up", k)
		}
	}
}

// Once a key's wait queue is gone, its lock hash no longer flags one: an
// acquisition and a release look for no queue (no EXISTS in their
// scripts), as on a key that was never contended.
func TestQueueFlagGoesWithQueue(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "flag")
	done, res := lockAsync(c, ctx, "flag")
	waitQueued(t, rdb, "flag", 1)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, done, 5*time.Second, "the waiter")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if err := res.unlock(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		_, unlock := locktest.MustLock(t, c, ctx, "flag")
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
	}
	if n := locktest.CommandCalls(t, rdb, "exists"); n != 0 {
		t.Errorf("10 uncontended pairs after the queue went looked for a queue %d times, want 0", n)
	}
	if q := rdb.HGet(ctx, "lockkit:{flag}", "q").Val(); q == "1" {
		t.Errorf("the lock hash flags a queue (q = %q) after it went", q)
	}
}
