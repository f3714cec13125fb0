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

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Liveness of turns: a turn reserved for a waiter that does not take it
// passes within its claim window; leaving waiters never extend it.

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

// A waiter that gives up (its context cancelled) leaves the wait queue:
// Lock waits 50 ms for Redis to take it out, which goes on in the
// background after that. The release then hands the key straight to the
// waiter behind it, with no claim window waited for the one that left.
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
	locktest.Eventually(t, locktest.Bound(50*time.Millisecond), "the waiter that gave up out of the queue", func() bool {
		return queueLen(t, rdb, "quit") == 1
	})
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

// The key is handed to a dead waiter (deadA) by a process that exits at
// once. The watchers told are a waiter W whose pub/sub path is slow (it
// does not hear the message), a dead waiter deadB and the dead last one
// deadX; the live waiter L behind deadB is not told. W gives up after the
// receiver's claim window lapsed: leaving, it finds the lock free and the
// waiter at the front past its deadline, drops it and opens the next turn
// to every queued waiter, so L must get the key within two claim windows
// ("whatever other waiters do").
func TestWatcherLeavingAfterLapseOpensNextTurn(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "leave-lapsed-" + randKey()
	holder := startReleaser(t, srv.Addr, key) // it exits at its release: no check of its own
	holder.held(t)
	gate := newPubsubGate()
	grdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: gate.dialer})
	t.Cleanup(func() { _ = grdb.Close() })
	quitter := locktest.NewClient(t, grdb)
	t.Cleanup(gate.release) // before the Clients close

	queueDeadWaiter(t, rdb, key, "deadA:1")
	waitQueued(t, rdb, key, 1)
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	qdone, _ := lockAsync(quitter, qctx, key)
	waitQueued(t, rdb, key, 2)
	queueDeadWaiter(t, rdb, key, "deadB:1")
	waitQueued(t, rdb, key, 3)
	live, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 4)
	queueDeadWaiter(t, rdb, key, "deadX:1")
	waitQueued(t, rdb, key, 5)
	waitSubscribed(t, rdb, key, 2)
	time.Sleep(50 * time.Millisecond)

	gate.shut()
	holder.release(t)
	handed := time.Now()
	if o := ownerIn(t, rdb, key); o != "deadA:1" {
		t.Fatalf("premise: the key went to %q, want deadA:1", o)
	}
	time.Sleep(1300*time.Millisecond - time.Since(handed)) // the receiver's window has lapsed
	if locktest.Held(t, rdb, "lockkit:{"+key+"}") {
		t.Fatal("premise: the dead receiver's claim window has not lapsed")
	}
	cancel()
	locktest.Within(t, qdone, 2*time.Second, "the waiter giving up")
	gate.release()
	waitTaken(t, live, res, handed, twoWindows(), "the live waiter")
}

// The key is handed to a dead waiter (deadA) and the releasing Client
// closes. W1 and the live waiter L2 behind it are two Lock calls of one
// Client C; C's first local waiter, W1, takes the notice to check the
// hand-off, then gives up before its check is due. A waiter leaves this
// process's queue of the key before it leaves the queue in Redis, so that
// what leaving tells C reaches L2, and passes on a check it was to make:
// L2 must get the key within two claim windows ("whatever other waiters
// do", also when the releasing process closes). A race per key when it
// failed (about half the time): three keys at once, and C's other work
// keeps its pipe busy.
func TestLocalWatcherLeavingPassesItsCheck(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	holder, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	c := locktest.NewClient(t, srv.Client(t))

	const n = 3
	var keys [n]string
	var unlocks [n]lock.UnlockFunc
	var lives [n]<-chan struct{}
	var results [n]*lockResult
	var wdones [n]<-chan struct{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		key := fmt.Sprintf("local-watcher-%s-%d", randKey(), i)
		keys[i] = key
		_, unlocks[i] = locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
		queueDeadWaiter(t, rdb, key, "deadA:1")
		wdones[i], _ = lockAsync(c, wctx, key)
		waitQueued(t, rdb, key, 2)
		lives[i], results[i] = lockAsync(c, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
		waitQueued(t, rdb, key, 3)
		queueDeadWaiter(t, rdb, key, "deadX:1")
		waitQueued(t, rdb, key, 4)
		waitSubscribed(t, rdb, key, 1)
	}
	time.Sleep(50 * time.Millisecond)

	for i := range n {
		if err := unlocks[i](); err != nil {
			t.Fatal(err)
		}
	}
	handed := time.Now()
	_ = holder.Close()
	for _, key := range keys {
		if o := ownerIn(t, rdb, key); o != "deadA:1" {
			t.Fatalf("premise: the key went to %q, want deadA:1", o)
		}
	}
	// C's other work keeps its pipe busy: leave.lua's reply comes back in a
	// pipeline with other calls' replies, a little after the message it
	// published reaches C's subscriber.
	stop := make(chan struct{})
	busy := make(chan struct{})
	for i := range 4 {
		go func() {
			defer func() { busy <- struct{}{} }()
			k := fmt.Sprintf("local-watcher-busy-%s-%d", randKey(), i)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, u, err := c.TryLock(ctx, k); err == nil {
					_ = u()
				}
			}
		}()
	}
	time.Sleep(400*time.Millisecond - time.Since(handed))
	cancel() // the W1s give up well within the receivers' windows
	for i := range n {
		locktest.Within(t, wdones[i], time.Second, "W1 giving up")
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	for range 4 {
		<-busy
	}
	for _, key := range keys {
		if !locktest.Held(t, rdb, "lockkit:{"+key+"}") {
			t.Fatal("premise: a receiver's window lapsed before W1 gave up")
		}
	}
	for i := range n {
		waitTaken(t, lives[i], results[i], handed, twoWindows(), fmt.Sprintf("the live waiter L2 of key %d", i))
	}
}
