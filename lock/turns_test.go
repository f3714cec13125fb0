package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// rounds is n, or LOCKKIT_ROUNDS when set (for longer measurements).
func rounds(t *testing.T, n int) int {
	if s := os.Getenv("LOCKKIT_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("LOCKKIT_ROUNDS=%q: %v", s, err)
		}
		return v
	}
	return n
}

// A release reaches a waiter that is still between its first attempt and
// its sleep: in every round the waiter gets the key right after the
// release, never after the holder's lease.
func TestNoLostWakeUp(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	n := rounds(t, 1000)
	var worst time.Duration
	for i := 0; i < n; i++ {
		_, unlock := locktest.MustLock(t, holder, ctx, "wake")
		done, res := lockAsync(waiter, ctx, "wake", lock.WithMaxWait(10*time.Second))
		time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
		released := time.Now()
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		<-done
		if res.err != nil {
			t.Fatalf("round %d: waiter: %v", i, res.err)
		}
		worst = max(worst, res.at.Sub(released))
		if err := res.unlock(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d rounds: largest release→acquire gap %v", n, worst)
	// The target is 50 ms; the bound leaves room for a loaded CI machine.
	// A lost wake-up costs the holder's lease (30 s).
	if worst > locktest.Bound(250*time.Millisecond) {
		t.Fatalf("largest release→acquire gap %v, want well under the lease", worst)
	}
}

// Waiters that give up never extend the turn of a waiter that is gone:
// the key is obtainable one claim window after the release, however many
// leave meanwhile.
func TestLeavingWaitersDoNotExtendADeadTurn(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	_, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder, ctx, "livelock")
	queueDeadWaiter(t, rdb, "livelock", "dead:1")
	done, res := lockAsync(locktest.NewClient(t, rdb), ctx, "livelock")
	waitQueued(t, rdb, "livelock", 2)

	// A stream of waiters, each giving up after 300 ms, one every 200 ms,
	// for 3 s: each leaves while the dead waiter has the turn.
	quitters := locktest.NewClient(t, rdb)
	stop := make(chan struct{})
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 15; i++ {
			go func() {
				if _, unlock, err := quitters.Lock(ctx, "livelock", lock.WithMaxWait(300*time.Millisecond)); err == nil {
					_ = unlock()
				}
			}()
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	locktest.Within(t, done, 5*time.Second, "waiter behind a dead turn")
	close(stop)
	<-streamDone
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.unlock()
	d := res.at.Sub(released)
	t.Logf("waiter acquired %v after the release", d)
	if d > time.Second+locktest.Bound(500*time.Millisecond) {
		t.Fatalf("waiter acquired %v after the release, want within about one 1 s claim window", d)
	}
}

// SIGKILLed processes with waiters queued for a key hold up a released
// key for about one claim window in all, not one per waiter nor one per
// process (the design's two-window bound).
func TestDeadProcessesStallAFreeKey(t *testing.T) {
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

// A key kept for a queued waiter's turn refuses TryLock and says why. The
// release hands the key to the first of two dead waiters; when that
// hand-off lapses unused, the next waiter gets a turn.
func TestTryLockDuringTurnSaysReserved(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder, ctx, "reserved")
	queueDeadWaiter(t, rdb, "reserved", "dead:1")
	queueDeadWaiter(t, rdb, "reserved", "other:1")
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if !locktest.Held(t, rdb, "lockkit:{reserved}") {
		t.Fatal("the release did not hand the key to the first waiter")
	}
	for locktest.Held(t, rdb, "lockkit:{reserved}") {
		time.Sleep(50 * time.Millisecond) // the hand-off lapses after the 1 s claim window
	}
	_, _, err := holder.TryLock(ctx, "reserved")
	var ne *lock.NotObtainedError
	if !errors.As(err, &ne) || !ne.Reserved {
		t.Fatalf("TryLock during a turn = %v, want a NotObtainedError with Reserved set", err)
	}
	if want := "reserved for a queued waiter's turn"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	_, unlock2 := locktest.MustLock(t, holder, ctx, "other")
	defer unlock2()
	if _, _, err := holder.TryLock(ctx, "other"); !errors.As(err, &ne) || ne.Reserved || !strings.Contains(err.Error(), "is held") {
		t.Fatalf("TryLock of a held key = %v, want \"is held\" without Reserved", err)
	}
}
