package lock_test

// Adversarial tests against a real redis-server: deadlines and Close on a
// stalled Redis, cleanup after cut-off calls, mutual exclusion under
// faults, wake-ups, and the errors callers see.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// obtainableAfter polls TryLock of key through c every 10 ms, up to limit,
// and returns how long it took to get it (unlocking it at once), or -1.
func obtainableAfter(c *lock.Client, key string, limit time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < limit {
		_, unlock, err := c.TryLock(context.Background(), key)
		if err == nil {
			d := time.Since(start)
			_ = unlock()
			return d
		}
		time.Sleep(10 * time.Millisecond)
	}
	return -1
}

// ---------------------------------------------------------------------
// Deadlines on a stalled Redis: the hold's mutex is held over Redis calls.
// ---------------------------------------------------------------------

// An unlock waits at most 1 s for a stalled Redis when its lock context has
// no deadline, even while a re-entry of the same hold (with no deadline of
// its own, so bounded only by go-redis's timeouts and retries) is stuck in
// Redis.
func TestUnlockNotBlockedByStuckReentry(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	var held context.Context
	var unlock lock.UnlockFunc
	srv, c := stalled(t, func(c *lock.Client, _ *redis.Client) {
		held, unlock = locktest.MustLock(t, c, context.Background(), "k")
	})
	reentered := make(chan struct{})
	go func() {
		defer close(reentered)
		_, u, err := c.Lock(held, "k") // no deadline: may wait for Redis
		if err == nil {
			_ = u()
		}
	}()
	time.Sleep(50 * time.Millisecond) // the re-entry's command is in Redis
	var err error
	took := timed(func() { err = unlock() })
	t.Logf("unlock while a re-entry is stuck in a stalled Redis: %v after %v", err, took)
	if took > time.Second+locktest.Bound(slack) {
		t.Errorf("unlock took %v on a stalled Redis, want within 1 s (its context has no deadline)", took)
	}
	srv.Resume()
	if !locktest.ClosedWithin(reentered, 15*time.Second) {
		t.Error("re-entry still stuck 15 s after Redis resumed")
	}
}

// A re-entry with a 200 ms deadline returns within it + 100 ms while an
// unlock of an inner level of the same hold waits (up to 1 s) for a
// stalled Redis.
func TestReentryDeadlineNotBlockedByPendingUnlock(t *testing.T) {
	locktest.Timed(t)
	var outer context.Context
	var unlockInner lock.UnlockFunc
	_, c := stalled(t, func(c *lock.Client, _ *redis.Client) {
		outer, _ = locktest.MustLock(t, c, context.Background(), "k")
		_, unlockInner = locktest.MustLock(t, c, outer, "k")
	})
	unlocked := make(chan struct{})
	go func() {
		defer close(unlocked)
		_ = unlockInner() // waits up to 1 s for the stalled Redis
	}()
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(outer, 200*time.Millisecond)
	defer cancel()
	var err error
	took := timed(func() { _, _, err = c.Lock(ctx, "k") })
	t.Logf("re-entry with a 200 ms deadline during a pending unlock: %v after %v", err, took)
	if took > 200*time.Millisecond+locktest.Bound(slack) {
		t.Errorf("re-entry took %v with a 200 ms deadline", took)
	}
	<-unlocked
}

// Two unlocks of one hold (inner level, then the outer one 10 ms later),
// both without a deadline: each returns within 1 s on a stalled Redis.
func TestConcurrentUnlocksEachWithinOneSecond(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	var unlockOuter, unlockInner lock.UnlockFunc
	_, c := stalled(t, func(c *lock.Client, _ *redis.Client) {
		var outer context.Context
		outer, unlockOuter = locktest.MustLock(t, c, context.Background(), "k")
		_, unlockInner = locktest.MustLock(t, c, outer, "k")
	})
	_ = c
	innerTook := make(chan time.Duration, 1)
	go func() { innerTook <- timed(func() { _ = unlockInner() }) }()
	time.Sleep(10 * time.Millisecond)
	var err error
	took := timed(func() { err = unlockOuter() })
	ti := <-innerTook
	t.Logf("stalled Redis: inner unlock %v, outer unlock %v (%v)", ti, took, err)
	if ti > time.Second+locktest.Bound(slack) || took > time.Second+locktest.Bound(slack) {
		t.Errorf("unlocks took %v (inner) and %v (outer) on a stalled Redis, want each within 1 s", ti, took)
	}
}

// A re-entry cut off by its deadline on a stalled Redis returns within it
// and reports ErrNotObtained joined with ctx.Err(), like any Lock whose
// context ended.
func TestReentryOnStalledRedisKeepsDeadlineAndError(t *testing.T) {
	locktest.Timed(t)
	var held context.Context
	_, c := stalled(t, func(c *lock.Client, _ *redis.Client) {
		held, _ = locktest.MustLock(t, c, context.Background(), "k")
	})
	ctx, cancel := context.WithTimeout(held, 200*time.Millisecond)
	defer cancel()
	var err error
	took := timed(func() { _, _, err = c.Lock(ctx, "k") })
	t.Logf("re-entry on a stalled Redis: %v after %v", err, took)
	if took > 200*time.Millisecond+locktest.Bound(slack) {
		t.Errorf("re-entry took %v with a 200 ms deadline", took)
	}
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("re-entry cut off by its deadline = %q; want ErrNotObtained joined with context.DeadlineExceeded", err)
	}
}

// ---------------------------------------------------------------------
// Close racing Lock: what a cut-off attempt took must not stay taken.
// ---------------------------------------------------------------------

// slowAcquireReply delays the reply of acquire.lua on key: the script has
// run in Redis, the caller hears of it only later.
type slowAcquireReply struct {
	key   string
	delay time.Duration
	once  sync.Once
	ran   chan struct{}
}

func (h *slowAcquireReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slowAcquireReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		// EVALSHA/EVAL sha-or-body 4 KEYS[1..4] ARGV[1..6]: acquire.lua
		if len(args) == 13 && args[3] == h.key && err == nil {
			h.once.Do(func() { close(h.ran) })
			time.Sleep(h.delay)
		}
		return err
	}
}
func (h *slowAcquireReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A Lock (or TryLock) whose acquisition ran in Redis but whose reply had
// not arrived when Close was called: Close ends the call with ErrClosed, so
// nobody holds the key; it must not stay blocked for the whole lease.
func TestCloseDuringAcquireLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	for _, try := range []bool{false, true} {
		name := "Lock"
		if try {
			name = "TryLock"
		}
		t.Run(name, func(t *testing.T) {
			srv, _ := newReal(t)
			rdb := srv.Client(t)
			hook := &slowAcquireReply{key: "lockkit:{closing}", delay: 300 * time.Millisecond, ran: make(chan struct{})}
			rdb.AddHook(hook)
			c, err := lock.New(rdb, lock.WithDefaultLease(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			res := make(chan error, 1)
			go func() {
				var err error
				if try {
					_, _, err = c.TryLock(context.Background(), "closing")
				} else {
					_, _, err = c.Lock(context.Background(), "closing")
				}
				res <- err
			}()
			locktest.Within(t, hook.ran, 2*time.Second, "the acquisition")
			took := timed(func() { _ = c.Close() })
			err = <-res
			t.Logf("%s cut off by Close: %v; Close took %v", name, err, took)
			if err == nil {
				t.Fatalf("%s returned success after Close", name)
			}
			other := locktest.NewClient(t, srv.Client(t))
			d := obtainableAfter(other, "closing", 3*time.Second)
			t.Logf("key obtainable %v after Close (-1: not within 3 s; lease 10 s)", d)
			if d < 0 || d > time.Second+locktest.Bound(500*time.Millisecond) {
				t.Errorf("key taken by a %s that Close cut off stays blocked (%v); want free within a claim window", name, d)
			}
		})
	}
}

// ---------------------------------------------------------------------
// Quorum mode with one node stalled.
// ---------------------------------------------------------------------

// Close returns within 1 s in quorum mode with one node frozen, also with
// go-redis ReadTimeout -1, while locks are held and a waiter waits.
func TestQuorumCloseWithStalledNode(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	for _, rt := range []time.Duration{0, -1} {
		t.Run("ReadTimeout="+rt.String(), func(t *testing.T) {
			srvs, _ := quorumOf(t, 3)
			var rdbs []redis.UniversalClient
			for _, s := range srvs {
				r := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: rt})
				t.Cleanup(func() { _ = r.Close() })
				rdbs = append(rdbs, r)
			}
			// The node timeout (lease/20 by default) leaves room for a busy machine.
			c, err := lock.NewQuorum(rdbs, lock.WithDefaultLease(time.Second), lock.WithNodeTimeout(locktest.Bound(50*time.Millisecond)))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var held []context.Context
			for i := range 5 {
				h, _ := locktest.MustLock(t, c, ctx, "c"+strconv.Itoa(i))
				held = append(held, h)
			}
			waiting := make(chan error, 1)
			go func() { _, _, err := c.Lock(ctx, "c0"); waiting <- err }()
			for _, s := range srvs {
				waitSubscribed(t, s.Client(t), "c0", 1)
			}
			srvs[1].Pause()
			t.Cleanup(srvs[1].Resume)
			time.Sleep(400 * time.Millisecond) // renewals under way in the frozen node
			took := timed(func() { err = c.Close() })
			t.Logf("Close took %v (%v)", took, err)
			if took > locktest.Bound(time.Second) {
				t.Errorf("Close took %v in quorum mode with one node frozen", took)
			}
			checkClosed(t, held, waiting)
		})
	}
}

// ---------------------------------------------------------------------
// Errors callers see.
// ---------------------------------------------------------------------

// exported reports whether err is one a caller can act on: it matches an
// exported sentinel of package lock, or wraps a Redis or network error.
func exported(err error) bool {
	for _, s := range []error{lock.ErrNotObtained, lock.ErrLost, lock.ErrClosed, lock.ErrNotHeld, lock.ErrInvalid} {
		if errors.Is(err, s) {
			return true
		}
	}
	var re redis.Error
	var ne net.Error
	return errors.As(err, &re) || errors.As(err, &ne)
}

// In quorum mode with two of three nodes frozen, TryLock fails with an
// error a caller can match (a Redis/network error or an exported one),
// not only with the package's internal "no answer within the node
// timeout".
func TestQuorumNoMajorityErrorIsExported(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srvs, clients := quorumOf(t, 3)
	c := newQuorum(t, clients())
	ctx := context.Background()
	_, u := locktest.MustLock(t, c, ctx, "warm")
	_ = u()
	srvs[0].Pause()
	srvs[1].Pause()
	t.Cleanup(srvs[0].Resume)
	t.Cleanup(srvs[1].Resume)
	_, _, err := c.TryLock(ctx, "q")
	t.Logf("TryLock with 2 of 3 nodes frozen: %v", err)
	if err == nil || !exported(err) {
		t.Errorf("TryLock with no majority = %q: matches no exported error, no Redis or network error", err)
	}
}

// ---------------------------------------------------------------------
// Mutual exclusion under faults.
// ---------------------------------------------------------------------

// interval is one hold of a key: from Lock's return to the unlock call or
// the end of the lock context, whichever came first.
type interval struct {
	key        string
	start, end time.Time
	who        string
}

type holdLog struct {
	mu  sync.Mutex
	all []interval
}

// section holds lctx's lock for a little while and records the hold.
func (hl *holdLog) section(lctx context.Context, key, who string, unlock lock.UnlockFunc) {
	start := time.Now()
	var endedAt atomic.Int64
	stop := context.AfterFunc(lctx, func() { endedAt.Store(time.Now().UnixNano()) })
	time.Sleep(time.Duration(rand.N(3000)) * time.Microsecond)
	end := time.Now()
	stop()
	if ns := endedAt.Load(); ns != 0 && time.Unix(0, ns).Before(end) {
		end = time.Unix(0, ns)
	}
	_ = unlock()
	hl.mu.Lock()
	hl.all = append(hl.all, interval{key, start, end, who})
	hl.mu.Unlock()
}

// overlaps returns the pairs of holds of one key that overlapped.
func (hl *holdLog) overlaps() []string {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	by := map[string][]interval{}
	for _, iv := range hl.all {
		by[iv.key] = append(by[iv.key], iv)
	}
	var out []string
	for key, ivs := range by {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
		var last interval
		for i, iv := range ivs {
			if i > 0 && iv.start.Before(last.end) {
				out = append(out, fmt.Sprintf("%q: %s held from %v, %s from %v, overlap %v",
					key, last.who, last.start.Format("15:04:05.000000"), iv.who, iv.start.Format("15:04:05.000000"), last.end.Sub(iv.start)))
			}
			if i == 0 || iv.end.After(last.end) {
				last = iv
			}
		}
	}
	return out
}

// contend runs workers that lock keys through lockers with short random
// deadlines (Lock, TryLock, re-entry) until stop is closed, logging every
// hold in hl.
func contend(lockers []*lock.Client, keys []string, workers int, hl *holdLog, stop <-chan struct{}, opts ...lock.LockOption) (acquired *atomic.Int64, wg *sync.WaitGroup) {
	acquired = &atomic.Int64{}
	wg = &sync.WaitGroup{}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := lockers[w%len(lockers)]
			who := "worker" + strconv.Itoa(w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[rand.N(len(keys))]
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+rand.N(400))*time.Millisecond)
				var lctx context.Context
				var unlock lock.UnlockFunc
				var err error
				if rand.N(3) == 0 {
					lctx, unlock, err = c.TryLock(ctx, key, opts...)
				} else {
					lctx, unlock, err = c.Lock(ctx, key, opts...)
				}
				if err == nil {
					acquired.Add(1)
					if rand.N(4) == 0 { // re-enter, and unlock the levels in either order
						if ictx, iu, err := c.Lock(lctx, key); err == nil {
							if rand.N(2) == 0 {
								hl.section(ictx, key, who, func() error { _ = iu(); return unlock() })
							} else {
								hl.section(ictx, key, who, func() error { _ = unlock(); return iu() })
							}
							cancel()
							continue
						}
					}
					hl.section(lctx, key, who, unlock)
				} else if !exported(err) && !errors.Is(err, context.DeadlineExceeded) {
					fmt.Printf("unexpected error type: %v\n", err)
				}
				cancel()
				time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
			}
		}()
	}
	return acquired, wg
}

// Mutual exclusion on one Redis that freezes again and again (SIGSTOP for
// 50-700 ms every few hundred ms), with callers cut off by their
// deadlines, the janitor cleaning up after them, leases of 1 s that may
// lapse, and two Clients.
func TestExclusionWhileRedisStutters(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	var lockers []*lock.Client
	for range 2 {
		lockers = append(lockers, locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(time.Second)))
	}
	hl := &holdLog{}
	stop := make(chan struct{})
	acquired, wg := contend(lockers, []string{"a", "b"}, 12, hl, stop)
	deadline := time.Now().Add(3 * time.Second)
	pauses := 0
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(100+rand.N(300)) * time.Millisecond)
		srv.Pause()
		pauses++
		time.Sleep(time.Duration(50+rand.N(650)) * time.Millisecond)
		srv.Resume()
	}
	close(stop)
	wg.Wait()
	t.Logf("%d holds over %d pauses", acquired.Load(), pauses)
	if acquired.Load() < int64(locktest.Least(20)) {
		t.Errorf("only %d holds in 6 s", acquired.Load())
	}
	for _, o := range hl.overlaps() {
		t.Error("two holders at once: " + o)
	}
}

// The same in quorum mode over three nodes, freezing one node at a time
// (sometimes two), so that acquisitions often reach a minority only.
func TestQuorumExclusionWhileNodesStutter(t *testing.T) {
	locktest.Timed(t)
	srvs, clients := quorumOf(t, 3)
	var lockers []*lock.Client
	for range 3 {
		lockers = append(lockers, newQuorum(t, clients(), lock.WithDefaultLease(time.Second)))
	}
	hl := &holdLog{}
	stop := make(chan struct{})
	acquired, wg := contend(lockers, []string{"a"}, 9, hl, stop)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(50+rand.N(300)) * time.Millisecond)
		victims := []*redistest.Server{srvs[rand.N(3)]}
		if rand.N(4) == 0 {
			victims = append(victims, srvs[rand.N(3)])
		}
		for _, s := range victims {
			s.Pause()
		}
		time.Sleep(time.Duration(50+rand.N(600)) * time.Millisecond)
		for _, s := range victims {
			s.Resume()
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d holds", acquired.Load())
	if acquired.Load() < int64(locktest.Least(20)) {
		t.Errorf("only %d holds in 6 s", acquired.Load())
	}
	for _, o := range hl.overlaps() {
		t.Error("two holders at once: " + o)
	}
}

// ---------------------------------------------------------------------
// Cleanup after a stall in quorum mode, dead processes, wake-ups, leaks.
// ---------------------------------------------------------------------

// Hand-offs between many live waiters of three Clients, while other
// callers keep joining the queue and giving up (150 ms wait limit): each
// release reaches the next live waiter within milliseconds.
func TestHandOffWithQuittersNoStall(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	var cs []*lock.Client
	for range 3 {
		cs = append(cs, locktest.NewClient(t, srv.Client(t)))
	}
	ctx := context.Background()
	const key = "chain"
	var mu sync.Mutex
	var lastRelease time.Time
	var worst time.Duration
	var holds atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[w%3]
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, unlock, err := c.Lock(ctx, key, lock.WithMaxWait(10*time.Second))
				if err != nil {
					t.Errorf("live waiter: %v", err)
					return
				}
				mu.Lock()
				if !lastRelease.IsZero() {
					worst = max(worst, time.Since(lastRelease))
				}
				mu.Unlock()
				holds.Add(1)
				time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
				mu.Lock()
				lastRelease = time.Now()
				mu.Unlock()
				if err := unlock(); err != nil {
					t.Errorf("unlock: %v", err)
					return
				}
			}
		}()
	}
	for q := range 6 { // quitters
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[q%3]
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, unlock, err := c.Lock(ctx, key, lock.WithMaxWait(time.Duration(5+rand.N(150))*time.Millisecond))
				if err == nil {
					mu.Lock()
					if !lastRelease.IsZero() {
						worst = max(worst, time.Since(lastRelease))
					}
					lastRelease = time.Now()
					mu.Unlock()
					_ = unlock()
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d hand-offs between live waiters; largest release→acquire gap %v", holds.Load(), worst)
	if worst > locktest.Bound(250*time.Millisecond) {
		t.Errorf("largest release→acquire gap %v with live waiters queued; want milliseconds", worst)
	}
}

// Redis Cluster with one master frozen: Lock, TryLock and unlock of keys
// on the healthy masters are not slowed down, calls on the frozen master
// keep their deadlines, and Close returns within 1 s.
func TestClusterOneMasterFrozen(t *testing.T) {
	locktest.Timed(t)
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	keys := spreadKeys(t, rdb, 3, 1)
	masterOf := map[string]string{}
	for _, k := range keys {
		m, err := rdb.MasterForKey(context.Background(), "lockkit:{"+k+"}")
		if err != nil {
			t.Fatal(err)
		}
		masterOf[k] = m.Options().Addr
	}
	c, err := lock.New(rdb, lock.WithDefaultLease(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var heldUnlock []lock.UnlockFunc
	for _, k := range keys {
		_, u := locktest.MustLock(t, c, ctx, k)
		heldUnlock = append(heldUnlock, u)
	}
	victim := cl.Masters[0]
	victim.Pause()
	t.Cleanup(victim.Resume)
	for i, k := range keys {
		frozen := masterOf[k] == victim.Addr
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		var err error
		var u lock.UnlockFunc
		took := timed(func() { _, u, err = c.TryLock(cctx, k+"x") })
		cancel()
		if err == nil {
			_ = u()
		}
		ut := timed(func() { err = heldUnlock[i]() })
		t.Logf("%s (frozen master: %v): TryLock %v, unlock %v (%v)", k, frozen, took, ut, err)
		if took > 200*time.Millisecond+locktest.Bound(slack) {
			t.Errorf("TryLock took %v with a 200 ms deadline", took)
		}
		if !frozen && (ut > locktest.Bound(200*time.Millisecond) || err != nil) {
			t.Errorf("unlock of %s on a healthy master: %v after %v", k, err, ut)
		}
		if frozen && ut > time.Second+locktest.Bound(slack) {
			t.Errorf("unlock of %s on the frozen master took %v", k, ut)
		}
	}
	time.Sleep(300 * time.Millisecond)
	took := timed(func() { _ = c.Close() })
	t.Logf("Close with one master frozen: %v", took)
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v with one master frozen", took)
	}
}

// Close on a frozen Redis with go-redis ReadTimeout -1, while a lock is
// held, a waiter waits and a new subscription is being made: once Close
// returned and the Redis client is closed (as Close's documentation says
// to do to end calls still under way), no goroutine of the Client is left.
func TestNoGoroutineLeftAfterCloseOnFrozenRedis(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	srv, _ := newReal(t)
	before := goleak.IgnoreCurrent()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: -1})
	c, err := lock.New(rdb, lock.WithDefaultLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	locktest.MustLock(t, c, ctx, "k")
	waiting := make(chan struct{})
	go func() { defer close(waiting); _, _, _ = c.Lock(ctx, "k") }()
	waitSubscribed(t, srv.Client(t), "k", 1)
	srv.Pause()
	t.Cleanup(srv.Resume)
	cut := make(chan struct{})
	go func() { // a new key: its subscription is asked for during the stall
		defer close(cut)
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, _, _ = c.Lock(cctx, "new")
	}()
	time.Sleep(400 * time.Millisecond)
	took := timed(func() { _ = c.Close() })
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v", took)
	}
	<-waiting
	<-cut
	_ = rdb.Close()
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after Close and rdb.Close on a frozen Redis: %v", err)
	}
}
