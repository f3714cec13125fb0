package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Close racing other calls: calls starting or under way during Close end
// with ErrClosed or their outcome, and leave no key blocked.

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

// Lock, TryLock and re-entries start while Close runs (Close cancels the
// calls under way from a registry). Every call returns within 1 s of
// Close; a hold that Close ended (or that its call obtained as Close ran)
// has cause ErrClosed, its unlock returns ErrClosed, and no key is left
// held by an owner nobody holds: another Client gets each within a claim
// window.
func TestCallsStartingDuringClose(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	other := locktest.NewClient(t, srv.Client(t))
	for iter := range 15 {
		c, err := lock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var mu sync.Mutex
		var keys []string
		for g := range 12 {
			key := fmt.Sprintf("close-race-%d-%d", iter, g)
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					var lctx context.Context
					var unlock lock.UnlockFunc
					var err error
					if g%3 == 0 {
						lctx, unlock, err = c.TryLock(context.Background(), key)
					} else {
						lctx, unlock, err = c.Lock(context.Background(), key)
					}
					if err != nil {
						if !errors.Is(err, lock.ErrClosed) && !errors.Is(err, lock.ErrNotObtained) {
							t.Errorf("Lock: %v", err)
						}
						return
					}
					if g%2 == 0 { // re-enter
						ictx, iunlock, err := c.Lock(lctx, key)
						if err == nil {
							if !lock.Held(ictx, key) && context.Cause(ictx) == nil {
								t.Errorf("re-entry neither held nor ended")
							}
							_ = iunlock()
						} else if !errors.Is(err, lock.ErrClosed) {
							t.Errorf("re-entry: %v", err)
						}
					}
					err = unlock()
					if errors.Is(err, lock.ErrClosed) {
						if cause := context.Cause(lctx); cause != lock.ErrClosed {
							t.Errorf("unlock said ErrClosed, cause %v", cause)
						}
						return
					}
					if err != nil && !errors.Is(err, lock.ErrNotHeld) {
						// a release cut off by Close is reported, not hidden
						t.Logf("unlock: %v", err)
					}
				}
			}()
		}
		close(start)
		time.Sleep(time.Duration(iter%5) * 3 * time.Millisecond)
		begun := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begun); d > locktest.Bound(time.Second) {
			t.Errorf("Close took %v", d)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		locktest.Within(t, done, time.Second+locktest.Bound(100*time.Millisecond), "calls under way at Close")
		for _, key := range keys {
			var err error
			deadline := time.Now().Add(1500 * time.Millisecond)
			for {
				var unlock lock.UnlockFunc
				_, unlock, err = other.TryLock(context.Background(), key)
				if err == nil {
					_ = unlock()
					break
				}
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("iteration %d: key %s still blocked 1.5 s after Close: %v", iter, key, err)
			}
		}
	}
}

// An unlock racing with Close reports either its own release (nil) or
// that Close ended the hold (ErrClosed), as the docs say: never ErrLost,
// which would tell the holder its lease was lost to someone else. An
// inner level's unlock is the case in point: Close deletes the key while
// the unlock's command, which lowers the hold count, is on its way, and
// Redis then finds no owner.
func TestUnlockRacingCloseIsErrClosed(t *testing.T) {
	t.Parallel()
	srv, _ := newReal(t)
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	var lost, closed int
	for i := range rounds {
		c, err := lock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		key := "close-unlock-" + randKey()
		ctx, unlockOuter := locktest.MustLock(t, c, context.Background(), key)
		_, unlockInner := locktest.MustLock(t, c, ctx, key)
		got := make(chan error, 1)
		go func() { got <- unlockInner() }()
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		switch err := <-got; {
		case err == nil:
		case errors.Is(err, lock.ErrClosed):
			closed++
		case errors.Is(err, lock.ErrLost):
			lost++
			t.Logf("round %d: inner unlock racing Close = %v", i, err)
		default:
			t.Fatalf("round %d: inner unlock racing Close = %v, want nil or ErrClosed", i, err)
		}
		if err := unlockOuter(); !errors.Is(err, lock.ErrClosed) {
			t.Fatalf("round %d: outer unlock after Close = %v, want ErrClosed", i, err)
		}
	}
	t.Logf("%d rounds: %d ErrClosed, %d ErrLost", rounds, closed, lost)
	if lost > 0 {
		t.Errorf("%d of %d inner unlocks racing Close returned ErrLost, want ErrClosed", lost, rounds)
	}
}

// Close cuts an unlock that waits for a stalled Redis: the unlock returns
// ErrClosed as Close starts, not at its own 1 s bound, so no caller's
// goroutine is left waiting on Redis after Close returns. With go-redis's
// ContextTimeoutEnabled the release runs on the unlock's goroutine, which
// only go-redis can stop: the unlock returns ErrClosed at its own bound
// (docs/operations.md).
func TestCloseCutsUnlockWaitingForRedis(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	c, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	_, unlock := locktest.MustLock(t, c, context.Background(), "k")
	srv.Pause()
	t.Cleanup(srv.Resume)
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	unlocked := time.Now()
	go func() {
		err := unlock()
		done <- result{err, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond) // the release is on its way to the stalled Redis
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	var r result
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the unlock did not return")
	}
	if !errors.Is(r.err, lock.ErrClosed) {
		t.Errorf("unlock cut by Close = %v, want ErrClosed", r.err)
	}
	if redistest.ContextTimeout() {
		if bound := unlocked.Add(time.Second + locktest.Bound(slack)); r.at.After(bound) {
			t.Errorf("unlock returned %v past its 1 s bound", r.at.Sub(bound))
		}
		return
	}
	if r.at.After(closed) {
		t.Errorf("unlock returned %v after Close returned (Close took %v), want before", r.at.Sub(closed), closed.Sub(start))
	}
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
			t.Parallel()
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

// Unlocks racing the end of short fixed and renewed leases, and Close
// racing both (the validity is the client's own clock):
// every call returns a documented error, every context ends with a
// documented cause, nothing panics, and goleak (TestMain) finds no
// goroutine left.
func TestUnlockAndCloseRaceExpiry(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	for round := range 30 {
		c, err := lock.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		var ctxs []context.Context
		for i := range 24 {
			key := fmt.Sprintf("race-%d-%d", round, i)
			opt := lock.WithFixedLease(lock.MinLease + time.Duration(i%5)*time.Millisecond)
			if i%2 == 1 {
				opt = lock.WithLease(lock.MinLease + time.Duration(i%5)*time.Millisecond)
			}
			lctx, unlock, err := c.Lock(context.Background(), key, opt)
			if err != nil {
				t.Fatal(err)
			}
			ctxs = append(ctxs, lctx)
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
				errs <- unlock()
			}()
		}
		closed := make(chan time.Duration, 1)
		if round%2 == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(15+rand.IntN(10)) * time.Millisecond)
				start := time.Now()
				_ = c.Close()
				closed <- time.Since(start)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil && !errors.Is(err, lock.ErrLost) && !errors.Is(err, lock.ErrClosed) {
				t.Errorf("unlock = %v, want nil, ErrLost or ErrClosed", err)
			}
		}
		for _, ctx := range ctxs {
			if cause := context.Cause(ctx); !errors.Is(cause, lock.ErrNotHeld) && cause != lock.ErrLost && cause != lock.ErrClosed {
				t.Errorf("hold context ended with %v", cause)
			}
		}
		select {
		case d := <-closed:
			if d > locktest.Bound(time.Second) {
				t.Errorf("Close took %v", d)
			}
		default:
			_ = c.Close()
		}
	}
}
