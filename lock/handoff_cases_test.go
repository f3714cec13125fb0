package lock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// onHandOff calls fn as soon as a release run through the Redis client it
// is added to answers that it handed the key to a waiter (release.lua's
// four-element reply), before the unlock that sent it returns.
type onHandOff struct {
	mu sync.Mutex
	fn func(waiter string)
}

func (h *onHandOff) set(fn func(string)) {
	h.mu.Lock()
	h.fn = fn
	h.mu.Unlock()
}

func (h *onHandOff) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *onHandOff) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c, ok := cmd.(*redis.Cmd)
		if !ok || err != nil || len(cmd.Args()) != 12 { // release.lua: 3 + 4 keys + 5 args
			return err
		}
		if v, _ := c.Slice(); len(v) == 4 {
			h.mu.Lock()
			fn := h.fn
			h.mu.Unlock()
			if fn != nil {
				w, _ := v[1].(string)
				fn(w)
			}
		}
		return err
	}
}
func (h *onHandOff) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A waiter gives up (context cancelled) the very moment a release hands it
// the key, give or take a few hundred µs. Either its Lock succeeds (and
// then nobody else gets the key until it unlocks), or it fails and the
// key goes on to the next waiter, queued behind it, within one claim
// window (in practice at once: the waiter leaves the queue and passes the
// key on). Never both, never neither.
func TestWaiterCancelledAtHandOff(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv, rdb := newReal(t)
	hrdb := srv.Client(t)
	hook := &onHandOff{}
	hrdb.AddHook(hook)
	holder := locktest.NewClient(t, hrdb)
	waiter := locktest.NewClient(t, srv.Client(t))
	next := locktest.NewClient(t, srv.Client(t))
	bg := context.Background()
	var worst time.Duration
	wins := 0
	const rounds = 25
	for i := range rounds {
		key := "ho-cancel-" + randKey()
		_, unlock := locktest.MustLock(t, holder, bg, key)
		wctx, cancel := context.WithCancel(bg)
		wdone, wres := lockAsync(waiter, wctx, key)
		waitQueued(t, rdb, key, 1)
		ndone, nres := lockAsync(next, bg, key, lock.WithMaxWait(10*time.Second))
		waitQueued(t, rdb, key, 2)
		delay := time.Duration(rand.N(600)) * time.Microsecond
		hook.set(func(string) {
			if i%2 == 0 {
				time.AfterFunc(delay, cancel)
			} else {
				cancel()
			}
		})
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		hook.set(nil)
		locktest.Within(t, wdone, 2*time.Second, "the cancelled waiter")
		if wres.err == nil {
			// It got the key: the next waiter must not have it too.
			wins++
			if !lock.Held(wres.ctx, key) {
				t.Fatalf("round %d: Lock succeeded but Held is false: %v", i, context.Cause(wres.ctx))
			}
			select {
			case <-ndone:
				t.Fatalf("round %d: both the cancelled waiter and the next one hold %q (next: %v)", i, key, nres.err)
			case <-time.After(50 * time.Millisecond):
			}
			if err := wres.unlock(); err != nil {
				t.Fatalf("round %d: unlock: %v", i, err)
			}
		} else if !errors.Is(wres.err, context.Canceled) {
			t.Fatalf("round %d: cancelled waiter = %v, want context.Canceled", i, wres.err)
		}
		locktest.Within(t, ndone, 3*time.Second, "the next waiter")
		if nres.err != nil {
			t.Fatalf("round %d: next waiter: %v", i, nres.err)
		}
		d := nres.at.Sub(released)
		if wres.err != nil {
			worst = max(worst, d)
			if d > time.Second+locktest.Bound(200*time.Millisecond) {
				t.Errorf("round %d (cancel after %v): next waiter got the key %v after the release; want within one 1 s claim window", i, delay, d)
			}
		}
		_ = nres.unlock()
	}
	t.Logf("%d/%d rounds the cancelled waiter still got the key; otherwise the next one got it at most %v after the release", wins, rounds, worst)
}

// Close of the waiter's Client the very moment a release hands its waiter
// the key: the waiter's Lock ends with ErrClosed (or succeeds, its hold
// then ended by Close with ErrClosed), Close keeps its 1 s bound, and the
// key reaches the next waiter of another Client within one claim window.
func TestCloseWhileHandedTheKey(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv, rdb := newReal(t)
	hrdb := srv.Client(t)
	hook := &onHandOff{}
	hrdb.AddHook(hook)
	holder := locktest.NewClient(t, hrdb)
	next := locktest.NewClient(t, srv.Client(t))
	bg := context.Background()
	for i := range 6 {
		key := "ho-close-" + randKey()
		waiter, err := lock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = waiter.Close() }) // closed below; again if the test fails first
		_, unlock := locktest.MustLock(t, holder, bg, key)
		wdone, wres := lockAsync(waiter, bg, key)
		waitQueued(t, rdb, key, 1)
		ndone, nres := lockAsync(next, bg, key, lock.WithMaxWait(10*time.Second))
		waitQueued(t, rdb, key, 2)
		closed := make(chan time.Duration, 1)
		delay := time.Duration(rand.N(1500)) * time.Microsecond
		hook.set(func(string) {
			go func() {
				time.Sleep(delay)
				start := time.Now()
				_ = waiter.Close()
				closed <- time.Since(start)
			}()
		})
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		hook.set(nil)
		var took time.Duration
		select {
		case took = <-closed:
		case <-time.After(3 * time.Second):
			t.Fatal("Close did not return within 3 s")
		}
		if took > time.Second+locktest.Bound(100*time.Millisecond) {
			t.Errorf("round %d: Close took %v", i, took)
		}
		locktest.Within(t, wdone, 2*time.Second, "the waiter of the closed Client")
		switch {
		case wres.err == nil:
			if cause := locktest.Cause(t, wres.ctx, time.Second); cause != lock.ErrClosed {
				t.Errorf("round %d: hold of the closed Client ended with %v, want ErrClosed", i, cause)
			}
		case !errors.Is(wres.err, lock.ErrClosed):
			t.Errorf("round %d: waiter of the closed Client = %v, want ErrClosed", i, wres.err)
		}
		locktest.Within(t, ndone, 4*time.Second, "the next waiter")
		if nres.err != nil {
			t.Fatalf("round %d: next waiter: %v", i, nres.err)
		}
		if d := nres.at.Sub(released); d > time.Second+locktest.Bound(200*time.Millisecond) {
			t.Errorf("round %d (Close after %v): next waiter got the key %v after the release; want within one 1 s claim window", i, delay, d)
		} else {
			t.Logf("round %d (Close after %v): next waiter got the key %v after the release", i, delay, d)
		}
		_ = nres.unlock()
	}
}

// A hold that was handed over re-enters like any other: the count in
// Redis follows the levels, the inner unlock keeps the key, re-entries
// share the handed-over token, and the outermost unlock hands the key on
// to the next waiter with a larger token.
func TestReentryOnHandedOverHold(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, srv.Client(t))
	next := locktest.NewClient(t, srv.Client(t))
	bg := context.Background()
	const key = "ho-reenter"
	name := "lockkit:{" + key + "}"
	hctx, unlock := locktest.MustLock(t, holder, bg, key)
	t0, _ := lock.FencingToken(hctx, key)
	wdone, wres := lockAsync(waiter, bg, key)
	waitQueued(t, rdb, key, 1)
	waitSubscribed(t, rdb, key, 1)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	acquired(t, wdone, wres, "the waiter the key was handed to")
	t1, ok := lock.FencingToken(wres.ctx, key)
	if !ok || t1 <= t0 {
		t.Fatalf("handed-over token %d (ok %v) after %d", t1, ok, t0)
	}
	ictx, iunlock, err := waiter.Lock(wres.ctx, key)
	if err != nil {
		t.Fatalf("re-entry of a handed-over hold: %v", err)
	}
	if n := rdb.HGet(bg, name, "n").Val(); n != "2" {
		t.Fatalf("hold count in Redis after the re-entry = %q, want 2", n)
	}
	if t2, _ := lock.FencingToken(ictx, key); t2 != t1 {
		t.Fatalf("re-entry token %d, want the outer one %d", t2, t1)
	}
	n0 := queueLen(t, rdb, key) // 1 while the handed-over holder stays first, else 0
	ndone, nres := lockAsync(next, bg, key, lock.WithMaxWait(10*time.Second))
	waitQueued(t, rdb, key, n0+1)
	// Past the claim window: the handed-over hold and its count are kept.
	time.Sleep(1200 * time.Millisecond)
	if err := iunlock(); err != nil {
		t.Fatalf("inner unlock: %v", err)
	}
	if n := rdb.HGet(bg, name, "n").Val(); n != "1" || !lock.Held(wres.ctx, key) {
		t.Fatalf("after the inner unlock: count %q, Held %v; want 1, true", n, lock.Held(wres.ctx, key))
	}
	select {
	case <-ndone:
		t.Fatalf("next waiter got the key while the outer level is held: %v", nres.err)
	default:
	}
	if err := wres.unlock(); err != nil {
		t.Fatalf("outer unlock: %v", err)
	}
	locktest.Within(t, ndone, 3*time.Second, "the next waiter")
	if nres.err != nil {
		t.Fatal(nres.err)
	}
	if t3, _ := lock.FencingToken(nres.ctx, key); t3 <= t1 {
		t.Fatalf("next token %d after %d", t3, t1)
	}
	if err := nres.unlock(); err != nil {
		t.Fatal(err)
	}
	if q := queueLen(t, rdb, key); q != 0 {
		t.Errorf("%d waiters left in the queue", q)
	}
}

// Fencing tokens strictly increase over a real Redis across every way a
// key changes hands: hand-offs, TryLock of a free key, a fixed lease that
// lapses, the lingering free hash expiring, FLUSHALL, and a restart of
// Redis without persistence, with a waiter handed the key after each.
func TestTokensIncreaseAcrossHandOffsExpiryFlushRestart(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv := redistest.Start(t)
	newC := func() *lock.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 5})
		t.Cleanup(func() { _ = rdb.Close() })
		return locktest.NewClient(t, rdb)
	}
	a, b := newC(), newC()
	rdb := srv.Client(t)
	bg := context.Background()
	const key = "ho-tokens"
	var last uint64
	check := func(step string, lctx context.Context) {
		t.Helper()
		tok, ok := lock.FencingToken(lctx, key)
		if !ok || tok <= last {
			t.Fatalf("%s: token %d (ok %v) after %d", step, tok, ok, last)
		}
		last = tok
	}
	handOff := func(step string) {
		t.Helper()
		hctx, unlock := locktest.MustLock(t, a, bg, key)
		check(step+": holder", hctx)
		done, res := lockAsync(b, bg, key, lock.WithMaxWait(5*time.Second))
		waitQueued(t, rdb, key, 1)
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		locktest.Within(t, done, 3*time.Second, step+": waiter")
		if res.err != nil {
			t.Fatalf("%s: waiter: %v", step, res.err)
		}
		check(step+": handed over", res.ctx)
		if err := res.unlock(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		handOff("hand-off " + string(rune('0'+i)))
	}
	lctx, unlock, err := a.TryLock(bg, key, lock.WithFixedLease(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	check("try-lock of the lingering free hash", lctx)
	_ = locktest.Cause(t, lctx, 2*time.Second) // lapses; the hash goes with it
	_ = unlock()
	locktest.Eventually(t, 5*time.Second, "the lapsed hash gone", func() bool { return rdb.Exists(bg, "lockkit:{"+key+"}").Val() == 0 })
	handOff("after the lease lapsed")
	// The free hash lingers 1 s at most.
	locktest.Eventually(t, 5*time.Second, "the free hash gone", func() bool { return rdb.Exists(bg, "lockkit:{"+key+"}").Val() == 0 })
	handOff("after the free hash expired")
	hctx, unlock := locktest.MustLock(t, a, bg, key)
	check("before FLUSHALL", hctx)
	if err := rdb.FlushAll(bg).Err(); err != nil {
		t.Fatal(err)
	}
	lctx, unlock2 := locktest.MustLock(t, b, bg, key, lock.WithMaxWait(time.Second))
	check("after FLUSHALL", lctx)
	_ = unlock()
	_ = unlock2()
	handOff("after FLUSHALL")
	srv.Restart()
	var rctx context.Context
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		var u lock.UnlockFunc
		if rctx, u, err = b.TryLock(bg, key); err == nil {
			check("after the restart", rctx)
			_ = u()
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("TryLock after the restart: %v", err)
		}
	}
	handOff("after the restart")
}

// On Redis Cluster a release hands the key to a waiter of another Client
// through sharded pub/sub: on keys of every master the waiter starts
// without sending a command (the SPUBLISHed hand-off is understood, not
// merely taken as a wake-up), with a larger token.
// (TestClusterWakeUpAcrossMasters checks only the wake-up's latency.)
func TestClusterHandOffWithoutACommand(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	cl := redistest.StartCluster(t, 3)
	data := cl.Client(t)
	holder := locktest.NewClient(t, cl.Client(t))
	wrdb := cl.Client(t)
	sent := &locktest.CommandCounter{}
	wrdb.AddHook(sent)
	waiter := locktest.NewClient(t, wrdb)
	bg := context.Background()
	for _, key := range spreadKeys(t, data, 3, 1) {
		hctx, unlock := locktest.MustLock(t, holder, bg, key)
		before, _ := lock.FencingToken(hctx, key)
		done, res := lockAsync(waiter, bg, key, lock.WithMaxWait(10*time.Second))
		locktest.Eventually(t, 5*time.Second, "the waiter queued", func() bool { return data.LLen(bg, "lockkit:{"+key+"}:queue").Val() == 1 })
		waitShardSubscribed(t, cl, "lockkit:{"+key+"}:released:*")
		time.Sleep(100 * time.Millisecond) // its attempt after the subscription made
		n := sent.N()
		released := time.Now()
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		locktest.Within(t, done, 3*time.Second, "waiter on "+key)
		if res.err != nil {
			t.Fatalf("%s: %v", key, res.err)
		}
		if d := sent.N() - n; d != 0 {
			t.Errorf("%s: the waiter sent %d commands between the release and holding the key, want 0", key, d)
		}
		if d := res.at.Sub(released); d > locktest.Bound(250*time.Millisecond) {
			t.Errorf("%s: handed over %v after the release, want milliseconds", key, d)
		}
		if tok, ok := lock.FencingToken(res.ctx, key); !ok || tok <= before {
			t.Errorf("%s: token %d (ok %v) after %d", key, tok, ok, before)
		}
		if err := res.unlock(); err != nil {
			t.Fatal(err)
		}
	}
}
