package lock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// failRenewals lets the first renewal pipeline of key's lock that a Redis
// client sends through and fails every later one at once, as a connection
// that broke after one renewal would (the commands never reach Redis).
type failRenewals struct {
	key    string       // the lock hash whose renewals are affected
	passed atomic.Int64 // pipelines let through
	failed atomic.Int64 // pipelines failed
}

var errInjected = errors.New("injected: renewal never reached Redis")

func (h *failRenewals) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *failRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *failRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		renewal := false
		for _, cmd := range cmds {
			if args := cmd.Args(); len(args) > 3 && args[3] == h.key {
				renewal = true
			}
		}
		if !renewal { // connection set-up, say
			return next(ctx, cmds)
		}
		if h.passed.Load() == 0 {
			err := next(ctx, cmds)
			ran := true
			for _, cmd := range cmds {
				ran = ran && !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT")
			}
			if ran { // not an EVALSHA Redis did not know, sent again with EVAL
				h.passed.Add(1)
			}
			return err
		}
		h.failed.Add(1)
		for _, cmd := range cmds {
			cmd.SetErr(errInjected)
		}
		return errInjected
	}
}

// A waiter with a lease shorter than the claim window is handed the key
// (TTL: the claim window, 1 s). Its watchdog's first renewal sets the TTL
// to the lease (90 ms); every later renewal fails before reaching Redis.
// The key then lapses about 90 ms after that renewal and another Client
// takes it: by then the handed-over holder must know it lost the key
// (context cancelled with ErrLost, Held false). Two holders at once is a
// mutual-exclusion failure, and FencingToken would still vouch for the
// stale one.
func TestHandedOverShortLeaseLearnsLossBeforeTakeover(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	const key = "ho-short"
	const lease = 90 * time.Millisecond
	holder := locktest.NewClient(t, rdb)
	wrdb := srv.Client(t)
	hook := &failRenewals{key: "lockkit:{" + key + "}"}
	wrdb.AddHook(hook)
	waiter := locktest.NewClient(t, wrdb)
	other := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()

	_, unlock := locktest.MustLock(t, holder, ctx, key)
	done, res := lockAsync(waiter, ctx, key, lock.WithLease(lease))
	waitQueued(t, rdb, key, 1)
	waitSubscribed(t, rdb, key, 1)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	acquired(t, done, res, "the waiter the key was handed to")

	// The first renewal went through (TTL now the 90 ms lease), later
	// ones fail (on a slow machine the hold may end by its validity before
	// a second renewal is due).
	locktest.Eventually(t, 2*time.Second, "a renewal failed or the hold ended", func() bool {
		return hook.failed.Load() > 0 || res.ctx.Err() != nil
	})
	t.Logf("PTTL after the first renewal: %v", rdb.PTTL(ctx, "lockkit:{"+key+"}").Val())
	start := time.Now()
	for {
		if time.Since(start) > 3*time.Second {
			t.Fatal("the key never lapsed in Redis although renewals fail")
		}
		octx, ounlock, err := other.TryLock(ctx, key, lock.WithFixedLease(5*time.Second))
		if err != nil {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		took := time.Since(start)
		handed := context.WithoutCancel(res.ctx)
		stillHeld := lock.Held(handed, key)
		tok, tokOK := lock.FencingToken(handed, key)
		otok, _ := lock.FencingToken(octx, key)
		cause := context.Cause(res.ctx)
		_ = ounlock()
		t.Logf("another Client took the key %v after renewals began to fail", took)
		if stillHeld || cause == nil {
			t.Fatalf("two holders: another Client holds the key (token %d) while the handed-over holder "+
				"still has Held=%v, FencingToken=%d/%v, context cause %v", otok, stillHeld, tok, tokOK, cause)
		}
		if !errors.Is(cause, lock.ErrLost) {
			t.Fatalf("handed-over holder ended with %v, want ErrLost", cause)
		}
		return
	}
}

// A waiter with a fixed lease shorter than the claim window is handed the
// key and confirms it with an attempt, which sets its lease (150 ms). It
// lets the lease lapse, as a fixed lease may ("the key simply expires"):
// once its context says the lease is gone, the key must be free for
// anyone, not kept for the rest of the claim window as if a queued waiter
// still had its turn.
func TestLapsedFixedLeaseAfterHandOffFreesKey(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	const key = "ho-fixed"
	const lease = 150 * time.Millisecond
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, rdb)
	other := locktest.NewClient(t, rdb)
	ctx := context.Background()

	_, unlock := locktest.MustLock(t, holder, ctx, key)
	done, res := lockAsync(waiter, ctx, key, lock.WithFixedLease(lease))
	waitQueued(t, rdb, key, 1)
	waitSubscribed(t, rdb, key, 1)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	acquired(t, done, res, "the waiter the key was handed to")
	handedAt := time.Now()
	if cause := locktest.Cause(t, res.ctx, 2*time.Second); !errors.Is(cause, lock.ErrLost) {
		t.Fatalf("fixed lease ended with %v, want ErrLost", cause)
	}
	lapsed := time.Now()
	t.Logf("fixed lease reported lost %v after the hand-off; PTTL now %v", lapsed.Sub(handedAt), rdb.PTTL(ctx, "lockkit:{"+key+"}").Val())
	// Allow the drift allowance and a generous margin: the key's TTL was
	// the 150 ms lease.
	var err error
	for time.Since(lapsed) < 300*time.Millisecond {
		var ounlock lock.UnlockFunc
		if _, ounlock, err = other.TryLock(ctx, key); err == nil {
			t.Logf("key free %v after the lease was reported lost", time.Since(lapsed))
			_ = ounlock()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	var ne *lock.NotObtainedError
	errors.As(err, &ne)
	t.Fatalf("key still not obtainable %v after the handed-over fixed lease (%v) lapsed: %v (Reserved=%v); "+
		"queue %v, waits %v", time.Since(lapsed), lease, err, ne != nil && ne.Reserved,
		rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val(), rdb.HGetAll(ctx, "lockkit:{"+key+"}:waits").Val())
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
			waiter := locktest.NewClient(t, srv.Client(t))
			other := locktest.NewClient(t, srv.Client(t))
			ctx := context.Background()
			t.Cleanup(srv.Resume) // before the server's own cleanup stops it

			_, unlock := locktest.MustLock(t, holder, ctx, key)
			done, res := lockAsync(waiter, ctx, key)
			waitQueued(t, rdb, key, 1)
			waitSubscribed(t, rdb, key, 1)
			var pausedAt time.Time
			hook.set(func(string) { srv.Pause(); pausedAt = time.Now() })
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
			hook.set(nil)
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

// The same hand-off as above, with a second waiter of the handed-over
// holder's Client queued behind it and a waiter of a third Client behind
// that: [W (fixed 150 ms lease), W2 (W's Client), X]. W takes the key and
// lets its lease lapse, as a live process may. W2 came before X, its
// process is alive, and it must get the key first (FIFO across Clients),
// and soon after W's lease lapsed, not after the claim window.
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
