package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Close: ends the Client's holds and waits, leaves its queue places, and
// returns within 1 s, even when Redis stalls.

// checkClosed checks what Close did to the holds and to a waiting Lock.
func checkClosed(t *testing.T, held []context.Context, waiting <-chan error) {
	t.Helper()
	for i, h := range held {
		if cause := context.Cause(h); cause != lock.ErrClosed {
			t.Errorf("lock %d: cause %v, want ErrClosed", i, cause)
		}
	}
	select {
	case err := <-waiting:
		if !errors.Is(err, lock.ErrClosed) {
			t.Errorf("waiting Lock = %v, want ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Error("waiting Lock not ended by Close")
	}
}

// Close ends its Client's holds (their contexts end with ErrClosed, and
// the keys are released in Redis) and waits (Lock returns ErrClosed), and
// leaves no goroutine behind; Lock after Close says ErrClosed, and the
// unlock of a hold Close ended says ErrClosed once.
func TestCloseEndsHoldsAndWaiters(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	mr, rdb := locktest.NewRedis(t)
	before := goleak.IgnoreCurrent()
	c, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	held, unlock := locktest.MustLock(t, c, ctx, "k")
	done, waiting := lockAsync(c, ctx, "k")
	locktest.Eventually(t, 5*time.Second, "the waiter subscribed", func() bool { return len(mr.PubSubChannels("lockkit:{k}:released:*")) == 1 })

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if cause := context.Cause(held); cause != lock.ErrClosed {
		t.Fatalf("held ctx cause = %v, want ErrClosed", cause)
	}
	locktest.Within(t, done, time.Second, "waiter woken by Close")
	if !errors.Is(waiting.err, lock.ErrClosed) {
		t.Fatalf("waiting Lock = %v, want ErrClosed", waiting.err)
	}
	goleak.VerifyNone(t, before)

	if _, _, err := c.Lock(ctx, "x"); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Lock after Close = %v", err)
	}
	if _, _, err := c.TryLock(ctx, "x"); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("TryLock after Close = %v", err)
	}
	if err := c.Close(); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	// Close released the key, so others need not wait for the lease; the
	// unlock function reports that Close ended the hold.
	if locktest.Held(t, rdb, "lockkit:{k}") {
		t.Fatal("key kept after Close")
	}
	if err := unlock(); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("unlock after Close = %v, want ErrClosed", err)
	}
	if err := unlock(); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second unlock after Close = %v, want ErrNotHeld", err)
	}
}

// Close while many goroutines lock and unlock (the pipe has queued calls
// and senders in flight): Close within 1 s, every call returns, nothing
// panics, and no goroutine is left once the calls returned.
func TestCloseUnderLoad(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	for _, stall := range []bool{false, true} {
		t.Run(fmt.Sprint("stall=", stall), func(t *testing.T) {
			srv, _ := newReal(t)
			before := goleak.IgnoreCurrent()
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			c, err := lock.New(rdb)
			if err != nil {
				t.Fatal(err)
			}
			var ops atomic.Int64
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for i := range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := fmt.Sprintf("close-load-%d", i%4)
					for {
						select {
						case <-stop:
							return
						default:
						}
						ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
						start := time.Now()
						_, unlock, err := c.Lock(ctx, key)
						if d := time.Since(start); d > locktest.Bound(400*time.Millisecond) {
							t.Errorf("Lock took %v with a 300 ms deadline: %v", d, err)
						}
						cancel()
						if errors.Is(err, lock.ErrClosed) {
							return
						}
						if err == nil {
							ops.Add(1)
							start = time.Now()
							uerr := unlock()
							if d := time.Since(start); d > time.Second+locktest.Bound(100*time.Millisecond) {
								t.Errorf("unlock took %v: %v", d, uerr)
							}
						}
					}
				}()
			}
			time.Sleep(700 * time.Millisecond)
			if stall {
				srv.Pause()
				time.Sleep(200 * time.Millisecond)
			}
			start := time.Now()
			err = c.Close()
			took := time.Since(start)
			t.Logf("Close after %d acquisitions took %v (%v)", ops.Load(), took, err)
			if took > locktest.Bound(time.Second) {
				t.Errorf("Close took %v", took)
			}
			close(stop)
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			locktest.Within(t, done, 3*time.Second, "callers after Close")
			if stall {
				srv.Resume()
			}
			time.Sleep(200 * time.Millisecond)
			if err := goleak.Find(before, goleak.IgnoreTopFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper")); err != nil {
				t.Errorf("goroutines left %v after Close: %v", time.Since(start), err)
			}
			_ = rdb.Close()
		})
	}
}

// Close takes the Client's queued waiters out of the Redis queue before it
// returns: a release right after Close hands the key to the live waiter of
// another Client at once, not to a waiter of the closed Client (which no
// one would confirm, so the live one would wait a claim window). The
// closed Client's Redis client is closed right after, as a program that
// shuts down does: nothing of Close's may be left to do then.
func TestCloseLeavesQueueBeforeReturning(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	const n = 25
	for round := range 5 {
		key := "close-queue-" + randKey()
		b := locktest.NewClient(t, rdb)
		c := locktest.NewClient(t, rdb)
		ardb := srv.Client(t)
		a, err := lock.New(ardb)
		if err != nil {
			t.Fatal(err)
		}
		_, unlockB := locktest.MustLock(t, b, ctx, key)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := a.Lock(ctx, key); !errors.Is(err, lock.ErrClosed) {
					t.Errorf("A's waiter = %v, want ErrClosed", err)
				}
			}()
		}
		waitQueued(t, rdb, key, n)
		cDone, cRes := lockAsync(c, ctx, key)
		waitQueued(t, rdb, key, n+1)
		queue := rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()
		live := queue[n:] // C's waiter

		start := time.Now()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > locktest.Bound(time.Second) {
			t.Errorf("Close took %v", d)
		}
		_ = ardb.Close()
		left := rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()
		if !slices.Equal(left, live) {
			t.Errorf("round %d: right after Close the queue holds %d owners, want only the other Client's waiter (%d of the closed Client's still queued)", round, len(left), len(left)-1)
		}
		released := time.Now()
		if err := unlockB(); err != nil {
			t.Fatal(err)
		}
		locktest.Within(t, cDone, 2*time.Second, "C's Lock")
		if cRes.err != nil {
			t.Fatalf("C's Lock = %v", cRes.err)
		}
		// One claim window (1 s) is what a hand-off to a closed Client's
		// waiter costs; a direct hand-off takes milliseconds.
		if d := cRes.at.Sub(released); d > locktest.Bound(300*time.Millisecond) {
			t.Errorf("round %d: C obtained the key %v after B's release, want at once", round, d)
		}
		_ = cRes.unlock()
		wg.Wait()
	}
}

// TestCloseLeavesQueueAfterShortStall (guarantee 7: "Its waiting Lock
// calls have left the Redis queue when it returns"): 10 waiters of the
// closing Client are queued behind another Client's hold; Redis freezes
// just before Close and resumes 500 ms into it. Close returns within 1 s
// and, since Redis answered in time, none of its waiters is left in the
// queue.
func TestCloseLeavesQueueAfterShortStall(t *testing.T) {
	t.Parallel()
	srv, admin := newReal(t)
	holder := locktest.NewClient(t, srv.Client(t))
	crdb := srv.Client(t)
	c, err := lock.New(crdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "adv-close-stall-" + randKey()
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(time.Minute))
	defer unlock()
	const n = 10
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.Lock(ctx, key); !errors.Is(err, lock.ErrClosed) {
				t.Errorf("waiter = %v, want ErrClosed", err)
			}
		}()
	}
	waitQueued(t, admin, key, n)
	srv.Pause()
	resumed := time.AfterFunc(500*time.Millisecond, srv.Resume)
	defer resumed.Stop()
	took := timed(func() { _ = c.Close() })
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v", took)
	}
	srv.Resume()
	left := admin.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val()
	if len(left) > 0 {
		t.Errorf("Close returned after %v with %d of its %d waiters still in the Redis queue (Redis answered again 500 ms into Close)", took, len(left), n)
	}
	wg.Wait()
}

// Close returns within 1 s when Redis stalls, also when the Redis client
// has no read timeout, and ends the holds with ErrClosed; a second Close
// called meanwhile waits for the first.
func TestCloseWhenRedisStalls(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	// go-redis's default read timeout (3 s), and none.
	for _, readTimeout := range []time.Duration{0, -1} {
		srv, _ := newReal(t)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: readTimeout})
		c, err := lock.New(rdb, lock.WithDefaultLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		held, unlock := locktest.MustLock(t, c, context.Background(), "k")
		waiting := make(chan error, 1)
		go func() {
			_, _, err := c.Lock(context.Background(), "k")
			waiting <- err
		}()
		locktest.Eventually(t, 5*time.Second, "the waiter queued", func() bool { return rdb.LLen(context.Background(), "lockkit:{k}:queue").Val() > 0 })
		srv.Pause()
		time.Sleep(400 * time.Millisecond) // a renewal is under way in the stalled Redis

		second := make(chan time.Duration, 1)
		took := timed(func() {
			go func() {
				time.Sleep(10 * time.Millisecond)
				d := timed(func() { _ = c.Close() })
				second <- d
			}()
			err = c.Close()
		})
		t.Logf("ReadTimeout %v: Close took %v on a stalled Redis", readTimeout, took)
		if err != nil {
			t.Errorf("Close = %v", err)
		}
		if took > locktest.Bound(time.Second) {
			t.Errorf("ReadTimeout %v: Close took %v on a stalled Redis", readTimeout, took)
		}
		if d := <-second; d > locktest.Bound(time.Second) {
			t.Errorf("second Close took %v", d)
		}
		checkClosed(t, []context.Context{held}, waiting)
		if err := unlock(); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("unlock after Close = %v, want ErrClosed", err)
		}
		srv.Resume()
		_ = rdb.Close()
		srv.Stop()
	}
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
