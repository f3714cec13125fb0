package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// FIFO: live waiters of a key get it in the order their attempts reached
// Redis, whatever Client they belong to; TryLock never queues.

// replyFaults acts on the script calls of one lock hash: it holds back the
// next new owner's attempt to acquire it (once armed) until let is closed, closing
// held when it has it, and loses the reply of the next release (once
// armed) after Redis ran it, as a connection that broke then would.
type replyFaults struct {
	key       string
	holdBack  atomic.Bool
	held, let chan struct{}
	loseReply atomic.Bool

	mu   sync.Mutex
	seen map[string]struct{} // owners whose attempts on key were sent
}

func (f *replyFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

// A Client sends a lone call as one command and concurrent calls as a
// pipeline (see internal/pipe), so the faults are injected in both.
func (f *replyFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			f.holdIfAttempt(cmd.Args())
		}
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if f.losesReplyOf(cmd.Args()) {
				cmd.SetErr(errReplyLost)
				err = errReplyLost
			}
		}
		return err
	}
}

func (f *replyFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.holdIfAttempt(cmd.Args())
		err := next(ctx, cmd)
		if err == nil && f.losesReplyOf(cmd.Args()) {
			cmd.SetErr(errReplyLost)
			return errReplyLost
		}
		return err
	}
}

// holdIfAttempt holds back, once holdBack is set, the first attempt on
// f's key of an owner that made none before (a new Lock call; not the
// retry of a waiter), until let is closed. acquire.lua has 4 keys and 6
// arguments, the owner first.
func (f *replyFaults) holdIfAttempt(args []any) {
	if len(args) != 13 || args[3] != f.key {
		return
	}
	owner, _ := args[7].(string)
	f.mu.Lock()
	_, old := f.seen[owner]
	if f.seen == nil {
		f.seen = make(map[string]struct{})
	}
	f.seen[owner] = struct{}{}
	f.mu.Unlock()
	if !old && f.holdBack.CompareAndSwap(true, false) {
		close(f.held)
		<-f.let
	}
}

// losesReplyOf reports whether the reply of the command with args is to be
// lost: the first release of f's key (4 keys and 5 arguments) once
// loseReply is set.
func (f *replyFaults) losesReplyOf(args []any) bool {
	return len(args) == 12 && args[3] == f.key && f.loseReply.CompareAndSwap(true, false)
}

var errReplyLost = errors.New("injected: the reply was lost")

// attemptGate watches the attempts to acquire one lock hash (acquire.lua:
// 4 keys and 6 arguments) and, once armed, holds back the reply of the
// next one after Redis ran it, until open is closed: its caller learns
// late that it was queued, as when its goroutine is descheduled.
type attemptGate struct {
	key      string
	armed    atomic.Bool
	attempts atomic.Int64  // attempts sent since the gate was made
	ran      chan struct{} // closed once Redis ran the held attempt
	open     chan struct{} // closed to let its reply through
}

func (g *attemptGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *attemptGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (g *attemptGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) != 13 || args[3] != g.key {
			return next(ctx, cmd)
		}
		g.attempts.Add(1)
		if !g.armed.CompareAndSwap(true, false) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		close(g.ran)
		<-g.open
		return err
	}
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

// A release that hands the key to a waiter of its own Client sends no
// message: the release's reply tells the Client, which wakes the waiter.
// A waiter whose Client had no waiter of the key joins the Client's list
// of waiters only after its first attempt, which queued it in Redis; a
// release in between finds no one to wake. Here that attempt's reply is
// held back until w0's release handed the key to w: w must still get the
// key within milliseconds, not when the claim window or the holder's lease
// it was told of runs out, and before v, queued behind it.
func TestReleaseWakesTheNextWaiterOfTheSameClient(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	const key = "same-client"
	g := &attemptGate{key: "lockkit:{" + key + "}", ran: make(chan struct{}), open: make(chan struct{})}
	rdb.AddHook(g)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, key) // 30 s lease, no waiter: nothing subscribed

	g.armed.Store(true)
	doneW, w := lockAsync(c, ctx, key)
	locktest.Within(t, g.ran, 5*time.Second, "w's first attempt")
	// v finds no waiter of the key in its Client either (w has not
	// joined): it subscribes, and tries again once that is confirmed.
	n := g.attempts.Load()
	doneV, v := lockAsync(c, ctx, key)
	waitQueued(t, rdb, key, 2)
	locktest.Eventually(t, 5*time.Second, "v tried again once subscribed", func() bool { return g.attempts.Load() >= n+2 })

	if err := unlock(); err != nil { // hands the key to w, first in the queue
		t.Fatal(err)
	}
	released := time.Now()
	close(g.open)
	select {
	case <-doneW:
	case <-doneV:
		t.Fatalf("v, queued behind w, got the key first (after %v)", time.Since(released))
	case <-time.After(500 * time.Millisecond):
		t.Fatalf("w, handed the key by a release of its own Client, did not get it within 500 ms")
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
	t.Logf("w got the key %v after the release", w.at.Sub(released))
	if err := w.unlock(); err != nil {
		t.Fatal(err)
	}
	acquired(t, doneV, v, "v")
}

// A release hands the key to a waiter W with a fixed lease, with a second
// waiter of W's Client queued behind it and a waiter of a third Client
// behind that: [W (fixed 150 ms lease), W2 (W's Client), X]. W takes the
// key and lets its lease lapse, as a live process may. W2 came before X,
// its process is alive, and it must get the key first (FIFO across
// Clients), and soon after W's lease lapsed, not after the claim window.
func TestLapsedHandOffKeepsFIFOForItsClient(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	const key = "ho-fifo"
	holder := locktest.NewClient(t, rdb)
	wc := locktest.NewClient(t, rdb)
	xc := locktest.NewClient(t, rdb)
	ctx := context.Background()

	_, unlock := locktest.MustLock(t, holder, ctx, key)
	wdone, wres := lockAsync(wc, ctx, key, lock.WithFixedLease(150*time.Millisecond))
	waitQueued(t, rdb, key, 1)
	w2done, w2res := lockAsync(wc, ctx, key, lock.WithMaxWait(10*time.Second))
	waitQueued(t, rdb, key, 2)
	xdone, xres := lockAsync(xc, ctx, key, lock.WithMaxWait(10*time.Second))
	waitQueued(t, rdb, key, 3)
	waitSubscribed(t, rdb, key, 2)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	acquired(t, wdone, wres, "W, handed the key")
	_ = locktest.Cause(t, wres.ctx, 2*time.Second)
	lapsed := time.Now()

	var first string
	select {
	case <-w2done:
		first = "W2"
	case <-xdone:
		first = "X"
	case <-time.After(5 * time.Second):
		t.Fatal("neither W2 nor X got the key within 5 s of W's lease lapsing")
	}
	t.Logf("%s got the key first, %v after W's lease lapsed; queue then %v", first, time.Since(lapsed),
		rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val())
	d := time.Since(lapsed)
	// End the first hold, let the other one have the key, end it too.
	type waiting struct {
		done <-chan struct{}
		res  *lockResult
	}
	order := []waiting{{w2done, w2res}, {xdone, xres}}
	if first == "X" {
		order[0], order[1] = order[1], order[0]
	}
	for _, r := range order {
		locktest.Within(t, r.done, 12*time.Second, "a waiter")
		if r.res.err != nil {
			t.Fatalf("waiter: %v", r.res.err)
		}
		if err := r.res.unlock(); err != nil {
			t.Fatal(err)
		}
	}
	if first != "W2" {
		t.Errorf("X, queued after W2, got the key first: W2 (alive, W's Client) was dropped from the queue as if its process had died")
	}
	if d > locktest.Bound(500*time.Millisecond) {
		t.Errorf("the key went to the next waiter %v after W's lease lapsed; want well under the 1 s claim window", d)
	}
}

// A release hands the key to a waiter of its own Client without a message:
// the reply tells it. When that reply is lost, the release that the
// janitor sends again finds the key handed over and names the waiter, so
// it is woken, even when it is not this process's first waiter of the key
// (waiters queue in Redis in the order their attempts arrive). Here a's
// attempt is held back, so Redis queues b before a, and the hand-off from
// w0 goes to b.
func TestLostReleaseReplyStillWakesHandedWaiter(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	f := &replyFaults{key: "lockkit:{lost-reply}", held: make(chan struct{}), let: make(chan struct{})}
	rdb.AddHook(f)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	const key = "lost-reply"
	_, unlock := locktest.MustLock(t, c, ctx, key)
	done0, w0 := lockAsync(c, ctx, key)
	waitQueued(t, rdb, key, 1)
	waitSubscribed(t, rdb, key, 1)

	f.holdBack.Store(true)
	doneA, a := lockAsync(c, ctx, key) // joins this process's queue, its attempt held back
	locktest.Within(t, f.held, 5*time.Second, "a's attempt held back")
	doneB, b := lockAsync(c, ctx, key)
	waitQueued(t, rdb, key, 2)
	close(f.let)
	waitQueued(t, rdb, key, 3)
	if q := rdb.LRange(ctx, "lockkit:{lost-reply}:queue", 0, -1).Val(); len(q) != 3 || ownerSeq(t, q[1]) < ownerSeq(t, q[2]) {
		t.Fatalf("premise: queue %v, want w0, then b, then a (whose owner was made before b's)", q)
	}

	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, done0, 5*time.Second, "w0")
	if w0.err != nil {
		t.Fatal(w0.err)
	}
	f.loseReply.Store(true)
	start := time.Now()
	if err := w0.unlock(); !errors.Is(err, errReplyLost) {
		t.Fatalf("w0's unlock: %v, want the injected lost reply", err)
	}
	took := locktest.Within(t, doneB, 5*time.Second, "b, the waiter w0's release handed the key to")
	t.Logf("b got the key %v after w0's release, whose reply was lost", took)
	if b.err != nil {
		t.Fatal(b.err)
	}
	if d := b.at.Sub(start); d > locktest.Bound(500*time.Millisecond) {
		t.Errorf("b got the key %v after w0's release, want within 500 ms (the janitor's release again)", d)
	}
	select {
	case <-doneA:
		t.Fatal("a, queued in Redis after b, got the key first")
	default:
	}
	if err := b.unlock(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, doneA, 5*time.Second, "a")
	if a.err != nil {
		t.Fatal(a.err)
	}
	_ = a.unlock()
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

// ownerSeq is the sequence number of owner "<client id>:<seq>": the
// owners of a Client's Lock calls are numbered in the order of the calls.
func ownerSeq(t *testing.T, owner string) int {
	t.Helper()
	n, err := strconv.Atoi(owner[strings.LastIndexByte(owner, ':')+1:])
	if err != nil {
		t.Fatalf("owner %q: %v", owner, err)
	}
	return n
}
