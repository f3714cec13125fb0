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

// Liveness after Redis stalls: calls cut off by a stall leave the key
// obtainable within one claim window of Redis answering again.

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

// Many calls cut off by a stall longer than go-redis's read timeout (its
// pipelines, sent under the Client's background context, are retried);
// afterwards each key is obtainable within a claim window of Redis
// answering again.
func TestManyCutOffCallsAfterLongStall(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	c := locktest.NewClient(t, srv.Client(t))
	keys := []string{"cut-a-" + randKey(), "cut-b-" + randKey(), "cut-c-" + randKey()}
	_, unlockHeld := locktest.MustLock(t, c, context.Background(), keys[0])
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 40 * time.Millisecond) // spread over 2.4 s
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			start := time.Now()
			var err error
			if i%3 == 2 {
				_, _, err = c.TryLock(ctx, keys[i%3])
			} else {
				_, _, err = c.Lock(ctx, keys[i%3])
			}
			if d := time.Since(start); d > 150*time.Millisecond+locktest.Bound(100*time.Millisecond) {
				t.Errorf("call %d took %v with a 150 ms deadline (%v)", i, d, err)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := unlockHeld(); err == nil {
		t.Error("unlock on a stalled Redis reported success")
	}
	wg.Wait()
	time.Sleep(4500*time.Millisecond - 2500*time.Millisecond)
	srv.Resume()
	resumed = true
	at := time.Now()
	other := locktest.NewClient(t, srv.Client(t))
	for _, key := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		_, unlock, err := other.Lock(ctx, key)
		cancel()
		if err != nil {
			t.Fatalf("Lock %q after the stall: %v", key, err)
		}
		took := time.Since(at)
		t.Logf("%q obtained %v after Redis resumed", key, took)
		if took > time.Second+locktest.Bound(500*time.Millisecond) {
			t.Errorf("%q blocked %v after Redis resumed; want within one claim window", key, took)
		}
		_ = unlock()
	}
}

// An unlock cut off by a stalled Redis hands the key to another waiter of
// the same Client when Redis resumes: a hand-off to the releasing Client's
// own waiter sends no message, the unlock's reply is gone. The waiter must
// still get the key within a claim window of Redis answering again.
func TestSelfHandOffAfterStalledUnlock(t *testing.T) {
	t.Parallel()
	for _, pause := range []time.Duration{1500 * time.Millisecond, 4 * time.Second} {
		t.Run(fmt.Sprint(pause), func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "self-stall-" + randKey()
			c := locktest.NewClient(t, srv.Client(t))
			_, unlock := locktest.MustLock(t, c, ctx, key, lock.WithLease(8*time.Second))
			// Two waiters of the same Client, then one of another.
			d2, r2 := lockAsync(c, ctx, key, lock.WithMaxWait(20*time.Second))
			waitQueued(t, rdb, key, 1)
			d3, r3 := lockAsync(c, ctx, key, lock.WithMaxWait(20*time.Second))
			waitQueued(t, rdb, key, 2)
			other := locktest.NewClient(t, srv.Client(t))
			d4, r4 := lockAsync(other, ctx, key, lock.WithMaxWait(20*time.Second))
			waitQueued(t, rdb, key, 3)
			waitSubscribed(t, rdb, key, 2)
			time.Sleep(50 * time.Millisecond)

			srv.Pause()
			resumed := false
			defer func() {
				if !resumed {
					srv.Resume()
				}
			}()
			start := time.Now()
			err := unlock()
			t.Logf("unlock on a stalled Redis: %v after %v", err, time.Since(start))
			time.Sleep(pause - time.Since(start))
			srv.Resume()
			resumed = true
			at := time.Now()
			for i, w := range []struct {
				d <-chan struct{}
				r *lockResult
			}{{d2, r2}, {d3, r3}, {d4, r4}} {
				locktest.Within(t, w.d, 15*time.Second, fmt.Sprint("waiter ", i+2))
				if w.r.err != nil {
					t.Fatalf("waiter %d: %v", i+2, w.r.err)
				}
				took := w.r.at.Sub(at)
				t.Logf("waiter %d got the key %v after Redis resumed", i+2, took)
				if took > time.Second+locktest.Bound(500*time.Millisecond) {
					t.Errorf("waiter %d got the key %v after Redis resumed, want within a claim window", i+2, took)
				}
				at = time.Now()
				if err := w.r.unlock(); err != nil {
					t.Errorf("unlock of waiter %d: %v", i+2, err)
				}
			}
		})
	}
}

// Redis freezes (SIGSTOP) the moment a release has handed the key to a
// waiter of another Client, for longer than the claim window (1.5 s) or
// shorter (500 ms). While Redis is frozen its clock runs on, so the
// handed key, whose first renewal is stuck in the frozen Redis, lapses
// during a long stall: the waiter, if it started the hold, must have
// learnt of the loss (ErrLost, Held false) by the time Redis answers
// again, and another Client gets the key within a claim window of the
// resumption. A short stall loses nothing: the stuck renewal runs before
// the window ends.
func TestRedisStallDuringHandOff(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	for _, stall := range []time.Duration{1500 * time.Millisecond, 500 * time.Millisecond} {
		t.Run(stall.String(), func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			key := "ho-stall"
			hrdb := srv.Client(t)
			hook := &onHandOff{}
			hrdb.AddHook(hook)
			holder := locktest.NewClient(t, hrdb)
			wrdb := srv.Client(t)
			gate := &holdCalls{}
			wrdb.AddHook(gate)
			waiter := locktest.NewClient(t, wrdb)
			other := locktest.NewClient(t, srv.Client(t))
			ctx := context.Background()
			t.Cleanup(srv.Resume) // before the server's own cleanup stops it

			_, unlock := locktest.MustLock(t, holder, ctx, key)
			done, res := lockAsync(waiter, ctx, key)
			waitQueued(t, rdb, key, 1)
			waitSubscribed(t, rdb, key, 1)
			// The waiter's commands wait from now until Redis is frozen:
			// its first renewal cannot reach Redis in between, however
			// late a loaded machine runs the freeze.
			gate.shut()
			var pausedAt time.Time
			hook.set(func(string) { srv.Pause(); pausedAt = time.Now(); gate.open() })
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
			hook.set(nil)
			if pausedAt.IsZero() {
				gate.open()
				t.Fatal("premise: the release's hand-off reply was not seen, Redis was not frozen")
			}
			time.Sleep(stall)
			startedBefore := false
			select {
			case <-done:
				startedBefore = res.err == nil
			default:
			}
			heldAtResume := startedBefore && lock.Held(context.WithoutCancel(res.ctx), key)
			srv.Resume()
			resumed := time.Now()
			t.Logf("stall %v: waiter started before the resumption: %v, still held then: %v", time.Since(pausedAt), startedBefore, heldAtResume)
			if stall > time.Second && heldAtResume {
				t.Fatalf("stall of %v past the 1 s claim window: the handed-over holder still counts on the key as Redis resumes", stall)
			}
			locktest.Within(t, done, 3*time.Second, "the waiter")
			if res.err != nil {
				t.Fatalf("waiter: %v", res.err)
			}
			if stall < time.Second {
				// Nothing was lost: the waiter keeps the key past the window.
				time.Sleep(1200 * time.Millisecond)
				if !lock.Held(res.ctx, key) {
					t.Fatalf("handed-over hold lost after a %v stall: %v", stall, context.Cause(res.ctx))
				}
				if _, _, err := other.TryLock(ctx, key); !errors.Is(err, lock.ErrNotObtained) {
					t.Fatalf("another TryLock while the handed-over hold lives = %v", err)
				}
				_ = res.unlock()
				return
			}
			// The waiter either lost the hand-off during the stall, or
			// took the key afresh after it; whichever holds, it is alone.
			for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
				octx, ounlock, err := other.TryLock(ctx, key)
				if err == nil {
					if lock.Held(context.WithoutCancel(res.ctx), key) {
						t.Fatalf("two holders after the stall (other's token %v)", octx)
					}
					t.Logf("another Client got the key %v after the resumption", time.Since(resumed))
					_ = ounlock()
					break
				}
				if lock.Held(res.ctx, key) {
					if err := res.unlock(); err != nil {
						t.Fatalf("unlock of the waiter's hold after the stall: %v", err)
					}
					continue
				}
				if time.Since(start) > time.Second+locktest.Bound(500*time.Millisecond) {
					t.Fatalf("key not obtainable %v after Redis resumed: %v", time.Since(start), err)
				}
			}
		})
	}
}

// TestStallAfterQueuedIsNotContention: Redis stalls after the waiter was
// queued; its retry at the holder's lease end goes unanswered until the
// wait limit (or the caller's deadline) passes. Redis did not answer in
// time: outcome error joined with context.DeadlineExceeded (ginlock's
// 503), not contention. A retry cut off soon after it was sent is still
// the key held (ginlock's TestWaitEndingDuringAnsweredRetryIsAConflict):
// the line is a retry unanswered for 100 ms.
func TestStallAfterQueuedIsNotContention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		bound func(context.Context) (context.Context, context.CancelFunc, []lock.LockOption)
	}{
		{"wait limit", func(ctx context.Context) (context.Context, context.CancelFunc, []lock.LockOption) {
			return ctx, func() {}, []lock.LockOption{lock.WithMaxWait(2 * time.Second)}
		}},
		{"context deadline", func(ctx context.Context) (context.Context, context.CancelFunc, []lock.LockOption) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			return ctx, cancel, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			rec := &recorder{}
			c := locktest.NewClient(t, srv.Client(t), lock.WithObserver(rec))
			holder := locktest.NewClient(t, srv.Client(t))
			key := "stall-queued-" + randKey()
			_, unlock := locktest.MustLock(t, holder, context.Background(), key, lock.WithFixedLease(500*time.Millisecond))
			defer func() { _ = unlock() }()
			ctx, cancel, opts := tc.bound(context.Background())
			defer cancel()
			done, res := lockAsync(c, ctx, key, opts...)
			waitQueued(t, rdb, key, 1)
			srv.Pause() // the retry at the lease's end (0.5 s) is not answered
			locktest.Within(t, done, 4*time.Second, "the waiter")
			srv.Resume()
			if res.err == nil {
				_ = res.unlock()
				t.Fatal("Lock succeeded with Redis stalled")
			}
			if !errors.Is(res.err, context.DeadlineExceeded) {
				t.Errorf("error %q is not joined with context.DeadlineExceeded (Redis did not answer the retry)", res.err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if n := len(rec.acquires); n != 1 {
				t.Fatalf("%d acquire events", n)
			}
			if o := rec.acquires[0].Outcome; o != lock.OutcomeError {
				t.Errorf("outcome %v (error %q), want error: Redis did not answer the retry in time", o, res.err)
			}
		})
	}
}

// holdCalls holds back every command of a Redis client while shut, as a
// connection that stopped sending, until open.
type holdCalls struct {
	mu     sync.Mutex
	closed chan struct{} // nil while open
}

func (g *holdCalls) shut() {
	g.mu.Lock()
	g.closed = make(chan struct{})
	g.mu.Unlock()
}

func (g *holdCalls) open() {
	g.mu.Lock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
	g.mu.Unlock()
}

func (g *holdCalls) wait(ctx context.Context) {
	g.mu.Lock()
	ch := g.closed
	g.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

func (g *holdCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *holdCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.wait(ctx)
		return next(ctx, cmd)
	}
}

func (g *holdCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		g.wait(ctx)
		return next(ctx, cmds)
	}
}
