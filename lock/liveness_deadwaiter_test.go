package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/lock/internal/janitor"
)

// Liveness with dead waiters and holders: a key held by, or handed to, a
// process that died (or froze) reaches a live waiter within two claim
// windows, and is obtainable by TryLock.

// holderLease is the holder's lease in the liveness tests: a live
// waiter that hears nothing sleeps until about this long after it queued.
const holderLease = 8 * time.Second

// ownerIn returns the owner written in key's lock hash.
func ownerIn(t *testing.T, rdb redis.Cmdable, key string) string {
	t.Helper()
	o, err := rdb.HGet(context.Background(), "lockkit:{"+key+"}", "o").Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return o
}

// twoWindows bounds how long after a hand-off to a dead waiter a live one
// gets the key: two 1 s claim windows, plus slack (scaled off CI, see
// locktest.Bound).
func twoWindows() time.Duration { return 2*time.Second + locktest.Bound(500*time.Millisecond) }

// waitTaken waits for a Lock started by lockAsync and fails unless it
// got the key no later than limit after since.
func waitTaken(t *testing.T, done <-chan struct{}, res *lockResult, since time.Time, limit time.Duration, what string) {
	t.Helper()
	locktest.Within(t, done, holderLease+5*time.Second, what+": Lock returned")
	if res.err != nil {
		t.Fatalf("%s: %v", what, res.err)
	}
	defer func() { _ = res.unlock() }()
	d := res.at.Sub(since)
	t.Logf("%s got the key %v after the dead waiter was handed it", what, d)
	if d > limit {
		t.Errorf("%s got the key %v after the key was handed to a dead waiter, want within %v (two 1 s claim windows); "+
			"it slept until the holder's lease (%v) would have ended", what, d, limit, holderLease)
	}
}

// queued is one waiter of TestWatchersOfHandOffToDeadWaiter's queue: a
// dead one (its owner, its process gone), the one live waiter that must get
// the key, a live one that gives up (its wait limit passes) before its
// check is due, or a live one of the releasing Client itself.
type queued struct {
	dead    string
	live    bool
	givesUp bool
	own     bool
}

// The release hands the key to a waiter whose process was SIGKILLed, with
// waiters of two more SIGKILLed processes behind it, and nobody else
// queued: the only caller left polls with TryLock (as a health check or a
// "run if free" job would). The contract: a released key whose next
// waiters are dead or gone is obtainable within two claim windows,
// whatever other waiters do.
func TestHandOffToKilledProcessesObtainableByTryLock(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	const procs = 4
	srv, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	ctx := context.Background()
	const key = "ho-deadtry"
	_, unlock := locktest.MustLock(t, holder, ctx, key)
	for i := range procs {
		env := fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,%d,%d", srv.Addr, key, 1, i+1)
		child := locktest.StartChild(t, env, "queued")
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if !locktest.Held(t, rdb, "lockkit:{"+key+"}") {
		t.Fatal("the release did not hand the key to the first (dead) waiter")
	}
	d := obtainableAfter(holder, key, 10*time.Second)
	t.Logf("TryLock got the key %v after the release, behind %d killed processes' waiters (-1: not within 10 s)", d, procs)
	if d < 0 || d > 2*time.Second+locktest.Bound(500*time.Millisecond) {
		t.Errorf("key obtainable by TryLock only %v after the release (-1: not within 10 s), behind %d killed processes' waiters; want within two 1 s claim windows", d, procs)
	}
}

// Real processes, all SIGKILLed: the holder is a child that releases and
// exits at once (no check of its own), the receiver's process A queued
// two waiters ahead of the live one, and a process B one behind it. The
// watchers looked for are the first waiters of other Clients than A's
// behind the receiver (the live one among them) and the last one: the
// live waiter must get the key within two claim windows.
func TestLiveWaiterBetweenKilledProcesses(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "watchers-killed-" + randKey()
	holder := startReleaser(t, srv.Addr, key)
	holder.held(t)
	a := locktest.StartChild(t, fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,%d,%d", srv.Addr, key, 2, 2), "queued")
	live, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 3)
	b := locktest.StartChild(t, fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,%d,%d", srv.Addr, key, 1, 4), "queued")
	waitSubscribed(t, rdb, key, 3)
	time.Sleep(50 * time.Millisecond)
	for _, p := range []*exec.Cmd{a, b} {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
	queue := rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()

	holder.release(t) // hands the key to A's first waiter and exits
	handed := time.Now()
	if o := ownerIn(t, rdb, key); len(queue) != 4 || o != queue[0] {
		t.Fatalf("premise: queue %q, key handed to %q", queue, o)
	}
	waitTaken(t, live, res, handed, twoWindows(), "the live waiter")
}

// TestFrozenThenKilledReceiverDoesNotStallKey (guarantee 6: "A hand-off to
// a dead waiter is noticed by the releasing Client", and a released key
// whose first waiters belong to dead processes is obtainable within two
// claim windows): the key is handed to the waiter of a process frozen
// (SIGSTOP: its subscription still takes the message) and SIGKILLed right
// after. The releasing Client is alive. The watchers Redis picks (the
// first two other Clients behind the receiver, and the last waiter) belong
// to processes killed before; a live waiter of a third Client stands among
// them. It must get the key within two claim windows of the release, or
// of the end of the releasing Client's first check when Redis never
// answered it.
func TestFrozenThenKilledReceiverDoesNotStallKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lose bool // the releasing Client's first check is lost on a half-open connection
	}{
		{"checked", false},
		{"first check lost", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "adv-frozen-receiver-" + randKey()
			px := locktest.StartProxy(t, srv.Addr)
			prdb := redis.NewClient(&redis.Options{Addr: px.Addr()})
			t.Cleanup(func() { _ = prdb.Close() })
			releaser := locktest.NewClient(t, prdb)
			_, unlock := locktest.MustLock(t, releaser, ctx, key, lock.WithLease(time.Minute))
			child := func(want int) *exec.Cmd {
				return locktest.StartChild(t, fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,%d,%d", srv.Addr, key, 1, want), "queued")
			}
			receiver := child(1)
			dead := []*exec.Cmd{child(2), child(3)}
			live, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(10*time.Second))
			waitQueued(t, rdb, key, 4)
			dead = append(dead, child(5)) // the last waiter
			waitSubscribed(t, rdb, key, 5)
			for _, p := range dead {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
			waitSubscribed(t, rdb, key, 2)
			queue := rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()
			_ = receiver.Process.Signal(syscall.SIGSTOP)
			if err := unlock(); err != nil { // hands the key to the frozen receiver
				t.Fatal(err)
			}
			handed := time.Now()
			var lost <-chan struct{}
			if tc.lose {
				lost = px.LoseFirst(key) // the releaser sends nothing else naming it
			}
			_ = receiver.Process.Kill()
			_ = receiver.Wait()
			if o := ownerIn(t, rdb, key); len(queue) != 5 || o != queue[0] {
				t.Fatalf("premise: queue %q, key handed to %q", queue, o)
			}
			since := handed
			if tc.lose {
				locktest.Within(t, lost, 3*time.Second, "premise: the releasing Client's check sent")
				since = time.Now().Add(janitor.CleanupTimeout) // when the check gives up
			}
			what := "the live waiter"
			if tc.lose {
				what += ", after the lost check gave up,"
			}
			waitTaken(t, live, res, since, twoWindows(), what)
		})
	}
}

// SIGKILLed processes with waiters queued for a key hold up a released
// key for about one claim window in all, not one per waiter nor one per
// process (the design's two-window bound).
func TestKilledProcessesWaitersHoldUpKeyTwoWindowsAtMost(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	for _, tc := range []struct{ procs, waiters int }{{1, 20}, {3, 2}} {
		srv, rdb := newReal(t)
		holder := locktest.NewClient(t, rdb)
		ctx := context.Background()
		const key = "deadq"
		_, unlock := locktest.MustLock(t, holder, ctx, key)
		for i := range tc.procs {
			env := fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,%d,%d", srv.Addr, key, tc.waiters, tc.waiters*(i+1))
			child := locktest.StartChild(t, env, "queued")
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
		}
		done, res := lockAsync(locktest.NewClient(t, rdb), ctx, key)
		waitQueued(t, rdb, key, int64(tc.procs*tc.waiters+1))
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		locktest.Within(t, done, 30*time.Second, "live waiter behind dead processes' waiters")
		if res.err != nil {
			t.Fatal(res.err)
		}
		d := res.at.Sub(released)
		t.Logf("live waiter acquired %v after the release, behind %d dead processes × %d waiters", d, tc.procs, tc.waiters)
		if d > 2*time.Second+locktest.Bound(500*time.Millisecond) {
			t.Errorf("%d dead processes: live waiter acquired %v after the release, want within two 1 s claim windows", tc.procs, d)
		}
		_ = res.unlock()
	}
}

// TestCrashFreesKey kills a holder process with SIGKILL: the key must be
// free again within one lease (1 s), with no unlock ever sent.
func TestCrashFreesKey(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv, rdb := newReal(t)
	cmd := locktest.StartChild(t, "LOCKKIT_CHILD_HOLD="+srv.Addr, "held")

	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	if _, _, err := c.TryLock(ctx, "crash"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock while the child holds = %v, want ErrNotObtained", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_, unlock := locktest.MustLock(t, c, ctx, "crash", lock.WithMaxWait(3*time.Second))
	defer unlock()
	if d := time.Since(killed); d > time.Second+locktest.Bound(500*time.Millisecond) {
		t.Fatalf("key free %v after the kill, want within the 1 s lease", d)
	} else {
		t.Logf("key free %v after SIGKILL (lease 1 s)", d)
	}
}

// One Client waits on many keys, each handed by a live holder to a dead
// waiter: every check of the holder (one per key) runs, and every waiter
// gets its key within two claim windows.
func TestManyKeysHandedToDeadWaiters(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	holder := locktest.NewClient(t, srv.Client(t))
	waiter := locktest.NewClient(t, srv.Client(t))
	const n = 40
	var unlocks []lock.UnlockFunc
	var dones []<-chan struct{}
	var results []*lockResult
	for i := range n {
		key := fmt.Sprintf("ho-many-%d", i)
		_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
		queueDeadWaiter(t, rdb, key, fmt.Sprintf("dead%d:1", i%3))
		done, res := lockAsync(waiter, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
		waitQueued(t, rdb, key, 2)
		unlocks, dones, results = append(unlocks, unlock), append(dones, done), append(results, res)
	}
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	for _, u := range unlocks {
		if err := u(); err != nil {
			t.Fatal(err)
		}
	}
	var worst time.Duration
	for i := range n {
		locktest.Within(t, dones[i], holderLease+5*time.Second, fmt.Sprintf("waiter %d", i))
		if results[i].err != nil {
			t.Fatalf("waiter %d: %v", i, results[i].err)
		}
		worst = max(worst, results[i].at.Sub(released))
		_ = results[i].unlock()
	}
	t.Logf("%d keys: the last waiter got its key %v after the releases", n, worst)
	if worst > 2*time.Second+locktest.Bound(500*time.Millisecond) {
		t.Errorf("a waiter got its key %v after the release to a dead waiter, want within two claim windows", worst)
	}
}
