package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Fencing: every acquisition of a key gets a token larger than any before,
// across hand-offs, expiry, FLUSHALL, restarts and force-unlocks.

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

// countOf returns the hold count of key's holder in Redis.
func countOf(t *testing.T, mr *locktest.Redis, key string) string {
	t.Helper()
	name := "lockkit:{" + key + "}"
	if o := mr.HGet(name, "o"); o == "" {
		t.Fatalf("no owner of %q", key)
	}
	return mr.HGet(name, "n")
}

func TestFencingTokensIncrease(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	var last uint64
	for i := range 1000 {
		lctx, unlock, err := c.TryLock(ctx, "fence", lock.WithFixedLease(time.Minute))
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		tok, ok := lock.FencingToken(lctx, "fence")
		if !ok || tok <= last {
			t.Fatalf("acquisition %d: token %d (ok %v) after %d", i, tok, ok, last)
		}
		last = tok
		if i%100 == 50 {
			// Let this one expire in Redis instead of unlocking it: every
			// key of the lock is gone, and the next token still larger.
			mr.FastForward(2 * time.Minute)
			if keys := mr.Keys(); len(keys) != 0 {
				t.Fatalf("keys left after the lease lapsed: %v", keys)
			}
			if err := unlock(); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("unlock %d after its lease lapsed in Redis = %v, want ErrLost", i, err)
			}
			continue
		}
		if err := unlock(); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
	}
	if _, ok := lock.FencingToken(ctx, "fence"); ok {
		t.Fatal("FencingToken ok for a context that holds nothing")
	}
	// The released lock's hash stays a second at most, free, and is all
	// that is left.
	if keys := mr.Keys(); len(keys) != 1 || keys[0] != "lockkit:{fence}" || mr.TTL(keys[0]) > time.Second || locktest.Held(t, rdb, keys[0]) {
		t.Fatalf("keys left: %v (TTL %v), want only the free lock hash, for 1 s at most", keys, mr.TTL("lockkit:{fence}"))
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

// TestForceUnlockFences: the old holder learns of the loss at its next
// renewal, its unlock reports it, the queued waiter gets the key with a
// larger token, and storage that checks tokens rejects the old holder.
func TestForceUnlockFences(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	old := locktest.NewClient(t, rdb, lock.WithOwnerLabel("stuck"))
	lease := 600 * time.Millisecond // renewed every 200 ms
	held, unlock := locktest.MustLock(t, old, ctx, "orders:42", lock.WithLease(lease))
	_, unlockInner := locktest.MustLock(t, old, held, "orders:42")
	oldToken, _ := lock.FencingToken(held, "orders:42")
	done := queueWaiters(t, rdb, "orders:42", 1)

	waiter := locktest.NewClient(t, rdb, lock.WithOwnerLabel("next"))
	next := locktest.TokenWhenLocked(t, waiter, ctx, "orders:42")
	waitQueued(t, rdb, "orders:42", 2)

	op := locktest.NewClient(t, rdb, lock.WithOwnerLabel("operator"))
	f, err := op.ForceUnlock(ctx, "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	if f.Holder.Label != "stuck" || f.Token != oldToken || f.HandedTo.Label != "w0" || f.NewToken != oldToken+1 {
		t.Fatalf("forced %+v: want stuck's token %d handed to w0 with %d", f, oldToken, oldToken+1)
	}
	if err := <-done[0]; err != nil {
		t.Fatalf("w0: %v", err)
	}
	if tok := <-next; tok <= oldToken+1 {
		t.Fatalf("next waiter's token %d, want more than %d", tok, oldToken+1)
	}
	// The old holder's watchdog ends its hold at the next renewal: within
	// a third of the lease, plus a generous allowance for a slow machine.
	locktest.Within(t, held.Done(), lease, "the old holder's loss")
	if cause := context.Cause(held); cause != lock.ErrLost {
		t.Fatalf("old holder's cause %v, want ErrLost", cause)
	}
	if err := unlockInner(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("old inner unlock: %v, want ErrLost", err)
	}
	if err := unlock(); !errors.Is(err, lock.ErrNotHeld) && !errors.Is(err, lock.ErrLost) {
		t.Fatalf("old unlock: %v, want ErrLost", err)
	}
	info, err := op.Inspect(ctx, "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held {
		t.Fatalf("after both waiters: %+v", info)
	}
}

// TestForceUnlockTokenAfterHashExpired: after a force-unlock with no
// waiter the hash keeps the last token about a second, then lapses; the
// next token (from Redis's clock) is still larger than the old holder's,
// also when the old one came from a long chain of hand-offs.
func TestForceUnlockTokenAfterHashExpired(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	var last uint64
	for range 50 { // a chain of holds within the linger: tokens +1 each
		held, unlock := locktest.MustLock(t, c, ctx, "chain")
		last, _ = lock.FencingToken(held, "chain")
		_ = unlock()
	}
	held, unlock := locktest.MustLock(t, c, ctx, "chain")
	defer unlock()
	old, _ := lock.FencingToken(held, "chain")
	if old != last+1 {
		t.Fatalf("chain: %d after %d", old, last)
	}
	if _, err := locktest.NewClient(t, rdb).ForceUnlock(ctx, "chain"); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 3*time.Second, "the forced hash lapsed", func() bool { return rdb.Exists(ctx, "lockkit:{chain}").Val() == 0 })
	next, unlockNext := locktest.MustLock(t, c, ctx, "chain")
	defer unlockNext()
	if tok, _ := lock.FencingToken(next, "chain"); tok <= old {
		t.Fatalf("token %d after the hash lapsed, old holder's %d", tok, old)
	}
}
