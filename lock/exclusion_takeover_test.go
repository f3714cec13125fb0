package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Exclusion at a takeover: a holder whose key lapses (renewals failing,
// Redis gone) learns of the loss before another Client can take the key.

// failRenewals lets the first renewal pipeline of key's lock that a Redis
// client sends through and fails every later one at once, as a connection
// that broke after one renewal would (the commands never reach Redis).
type failRenewals struct {
	key    string       // the lock hash whose renewals are affected
	passed atomic.Int64 // pipelines let through
	failed atomic.Int64 // pipelines failed
}

func (h *failRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }

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

var errInjected = errors.New("injected: renewal never reached Redis")

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestManyHoldersToldBeforeTakeover (guarantee 1 and 2: the holder's
// context is cancelled with ErrLost before Redis can hand the key to
// anyone else): one Client holds 200 keys with a 600 ms lease (drift
// allowance 60 ms, so a timer late on a loaded machine is not counted),
// another Client waits for each; Redis freezes for 1 s, longer than the
// lease. When a waiter obtains a key, the holder's lock context of that
// key must be done already, with cause ErrLost.
func TestManyHoldersToldBeforeTakeover(t *testing.T) {
	t.Parallel()
	srv, _ := newReal(t)
	opts := []lock.Option{lock.WithDefaultLease(600 * time.Millisecond), lock.WithDrift(60 * time.Millisecond)}
	holder := locktest.NewClient(t, srv.Client(t), opts...)
	other := locktest.NewClient(t, srv.Client(t), opts...)
	ctx := context.Background()
	const n = 200
	held := make([]context.Context, n)
	keys := make([]string, n)
	for i := range n {
		keys[i] = "adv-many-" + randKey()
		held[i], _ = locktest.MustLock(t, holder, ctx, keys[i])
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	obtained := 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, unlock, err := other.Lock(ctx, keys[i], lock.WithMaxWait(5*time.Second))
			if err != nil {
				return
			}
			mu.Lock()
			obtained++
			if held[i].Err() == nil || !errors.Is(context.Cause(held[i]), lock.ErrLost) {
				bad = append(bad, keys[i]+": "+time.Now().Format("15:04:05.000")+", holder's cause "+errString(context.Cause(held[i])))
			}
			mu.Unlock()
			_ = unlock()
		}()
	}
	time.Sleep(300 * time.Millisecond) // the waiters queue
	srv.Pause()
	time.Sleep(time.Second)
	srv.Resume()
	wg.Wait()
	t.Logf("%d of %d keys taken over", obtained, n)
	for i, b := range bad {
		if i == 5 {
			t.Errorf("... %d in all", len(bad))
			break
		}
		t.Errorf("the waiter obtained the key while its holder's context was live: %s", b)
	}
	if obtained < n/2 {
		t.Errorf("only %d of %d keys taken over after the holders lost them", obtained, n)
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
