package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// slack is what the contract allows a public call past its context's
// deadline.
const slack = 100 * time.Millisecond

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// stalled starts a real Redis, lets setup use it, then freezes it with
// SIGSTOP until the test ends. The go-redis client has default options.
func stalled(t *testing.T, setup func(c *lock.Client, rdb *redis.Client)) (*redistest.Server, *lock.Client) {
	t.Helper()
	srv, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	setup(c, rdb)
	srv.Pause()
	t.Cleanup(srv.Resume) // before the server's own cleanup stops it
	return srv, c
}

// Lock, TryLock and an unlock return within their context's deadline +
// 100 ms when Redis stalls, with go-redis's default timeouts (3 s reads),
// although the cleanup they leave must still reach Redis.
func TestCallsKeepDeadlinesWhenRedisStalls(t *testing.T) {
	locktest.Timed(t)
	slack := locktest.Bound(slack)
	var heldCtx context.Context
	var unlockHeld lock.UnlockFunc
	_, c := stalled(t, func(c *lock.Client, _ *redis.Client) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		t.Cleanup(cancel)
		heldCtx, unlockHeld = locktest.MustLock(t, c, ctx, "held")
	})
	const limit = 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Lock", func(ctx context.Context) error { _, _, err := c.Lock(ctx, "other"); return err }},
		{"Lock of a held key", func(ctx context.Context) error { _, _, err := c.Lock(ctx, "held"); return err }},
		{"TryLock", func(ctx context.Context) error { _, _, err := c.TryLock(ctx, "other"); return err }},
		{"Lock with WithMaxWait", func(ctx context.Context) error {
			_, _, err := c.Lock(context.Background(), "other", lock.WithMaxWait(limit))
			return err
		}},
		{"TryLock with WithMaxWait", func(ctx context.Context) error {
			_, _, err := c.TryLock(context.Background(), "other", lock.WithMaxWait(limit))
			return err
		}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		var err error
		took := timed(func() { err = tc.call(ctx) })
		cancel()
		t.Logf("%s on a stalled Redis: %v after %v", tc.name, err, took)
		if took > limit+slack {
			t.Errorf("%s took %v with a %v deadline", tc.name, took, limit)
		}
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s = %v, want ErrNotObtained and DeadlineExceeded", tc.name, err)
		}
	}
	tctx, cancel := context.WithTimeout(context.Background(), limit)
	var terr error
	took := timed(func() { _, terr = c.Time(tctx) })
	cancel()
	if took > limit+slack || !errors.Is(terr, context.DeadlineExceeded) {
		t.Errorf("Time on a stalled Redis: %v after %v, want DeadlineExceeded within %v", terr, took, limit)
	}
	// The held lock's context has a 300 ms deadline, which has passed or
	// passes during the unlock: the unlock waits at most 100 ms past it.
	var err error
	took = timed(func() { err = unlockHeld() })
	wait := time.Until(deadlineOf(heldCtx))
	t.Logf("unlock on a stalled Redis: %v after %v", err, took)
	if took > max(wait, 0)+slack {
		t.Errorf("unlock took %v, %v past its context's deadline", took, took-max(wait, 0))
	}
	if err == nil || errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("unlock on a stalled Redis = %v, want an error saying the release is not confirmed", err)
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// What calls cut off by a stalled Redis leave behind (an attempt that may
// still take the key, a queued waiter, an unconfirmed release) blocks the
// key for at most one claim window after Redis answers again; in quorum
// mode, with every node frozen, likewise.
func TestCutOffCallsDoNotBlockKeyAfterStall(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			t.Parallel()
			var srvs []*redistest.Server
			var newClient func() *lock.Client
			if nodes == 1 {
				srv, _ := newReal(t)
				srvs = append(srvs, srv)
				newClient = func() *lock.Client { return locktest.NewClient(t, srv.Client(t)) }
			} else {
				var clients func() []redis.UniversalClient
				srvs, clients = quorumOf(t, nodes)
				newClient = func() *lock.Client { return newQuorum(t, clients()) }
			}
			c := newClient()
			_, unlockHeld := locktest.MustLock(t, c, context.Background(), "k")
			for _, srv := range srvs {
				srv.Pause()
				t.Cleanup(srv.Resume) // before the server's own cleanup stops it
			}
			// Waiters and attempts whose commands sit in the stalled Redis.
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
					defer cancel()
					switch i {
					case 0:
						_, _, _ = c.TryLock(ctx, "free")
					case 1:
						_, _, _ = c.Lock(ctx, "free")
					default:
						_, _, _ = c.Lock(ctx, "k")
					}
				}()
			}
			wg.Wait()
			if err := unlockHeld(); err == nil {
				t.Fatal("unlock on a stalled Redis reported success")
			}
			time.Sleep(300 * time.Millisecond) // the stall goes on a while
			for _, srv := range srvs {
				srv.Resume()
			}
			resumed := time.Now()
			other := newClient()
			for _, key := range []string{"k", "free"} {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, unlock, err := other.Lock(ctx, key)
				cancel()
				if err != nil {
					t.Fatalf("Lock %q after the stall: %v", key, err)
				}
				took := time.Since(resumed)
				t.Logf("%q obtained %v after Redis resumed", key, took)
				if took > time.Second+locktest.Bound(500*time.Millisecond) {
					t.Errorf("%q blocked %v after Redis resumed; want within one claim window (1 s)", key, took)
				}
				if err := unlock(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
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

// stickHook makes the first renewal pipeline that carries key hang, as on
// a half-open connection with no read timeout, until the test ends.
type stickHook struct {
	key   string
	once  sync.Once
	stuck chan struct{} // closed when the pipeline hangs
	free  chan struct{} // closed at the end of the test
}

func (h *stickHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *stickHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *stickHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			args := cmd.Args()
			if len(args) > 3 && args[3] == h.key {
				hang := false
				h.once.Do(func() { hang = true })
				if hang {
					close(h.stuck)
					<-h.free
				}
			}
		}
		return next(ctx, cmds)
	}
}

// A renewal that hangs on one connection delays only the leases it
// carried: another lock of the same Client, due at another moment, keeps
// its lease, and the hung leases are renewed again on another connection
// before their validity ends.
func TestStuckRenewalAffectsOnlyItsLeases(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	_, rdb := newReal(t)
	hook := &stickHook{key: "lockkit:{stuck}", stuck: make(chan struct{}), free: make(chan struct{})}
	rdb.AddHook(hook)
	t.Cleanup(func() { close(hook.free) })
	c := locktest.NewClient(t, rdb)
	const lease = 1500 * time.Millisecond // renewed every 500 ms
	ctx := context.Background()
	stuck, unlockStuck := locktest.MustLock(t, c, ctx, "stuck", lock.WithLease(lease))
	time.Sleep(lease / 6) // due at other moments
	healthy, unlockHealthy := locktest.MustLock(t, c, ctx, "healthy", lock.WithLease(lease))

	locktest.Within(t, hook.stuck, 2*lease, "the stuck renewal")
	time.Sleep(3 * lease)
	for name, lctx := range map[string]context.Context{"healthy": healthy, "stuck": stuck} {
		if err := context.Cause(lctx); err != nil {
			t.Errorf("%s lock ended (%v) %v after one renewal hung", name, err, 3*lease)
		}
	}
	for _, unlock := range []lock.UnlockFunc{unlockHealthy, unlockStuck} {
		if err := unlock(); err != nil {
			t.Errorf("unlock: %v", err)
		}
	}
}

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
