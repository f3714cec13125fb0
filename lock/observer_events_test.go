package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// The Observer's contexts: commands run under the contexts the Observer
// returned, named and marked internal where they are.

// ctxMark is a context value a test observer adds and a Redis hook looks for.
type ctxMark struct{}

// markingObserver marks the contexts of the Client's background work and of
// each call with different values.
type markingObserver struct{ recorder }

func (o *markingObserver) Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, ctxMark{}, "background")
}

func (o *markingObserver) AcquireStarted(ctx context.Context, a lock.Acquire) context.Context {
	return context.WithValue(ctx, ctxMark{}, "call")
}

func (o *markingObserver) AcquireEnded(ctx context.Context, a lock.Acquire, held context.Context) context.Context {
	if held == nil {
		return nil
	}
	return context.WithValue(held, ctxMark{}, "hold")
}

// markHook records, per command name, the marks of the contexts that
// commands run under.
type markHook struct{ marks chan string }

func (h markHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h markHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(ctx, cmd)
		return next(ctx, cmd)
	}
}

func (h markHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.note(ctx, cmd)
		}
		return next(ctx, cmds)
	}
}

func (h markHook) note(ctx context.Context, cmd redis.Cmder) {
	mark, _ := ctx.Value(ctxMark{}).(string)
	select {
	case h.marks <- mark:
	default:
	}
}

// TestObserverNameAndInternal: WithName and Integration.Internal reach the
// observer with the call; a bad name is refused before any Redis call.
func TestObserverNameAndInternal(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	rec := &recorder{}
	c := locktest.NewClient(t, rdb, lock.WithObserver(rec))
	ctx := context.Background()

	_, unlock := locktest.MustLock(t, c, ctx, "orders:42", lock.WithName("orders:{id}"))
	_ = unlock()
	_, unlock = locktest.MustLock(t, c, ctx, "cron:tick:report", lock.Integration{}.Internal())
	_ = unlock()
	rec.mu.Lock()
	got := append([]lock.Acquire(nil), rec.acquires...)
	rec.mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d acquire events, want 2", len(got))
	}
	if got[0].Name != "orders:{id}" || got[0].Internal {
		t.Errorf("named lock: Name %q Internal %v, want orders:{id} false", got[0].Name, got[0].Internal)
	}
	if got[1].Name != "" || !got[1].Internal {
		t.Errorf("internal lock: Name %q Internal %v, want empty true", got[1].Name, got[1].Internal)
	}

	cc := locktest.CountCommands(rdb)
	for _, name := range []string{"", strings.Repeat("n", lock.MaxNameLen+1), "\xff"} {
		_, _, err := c.Lock(ctx, "orders:42", lock.WithName(name))
		if !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("WithName(%q): %v, want ErrInvalid", name, err)
		}
		if err := (lock.Integration{}).CheckLockOptions(lock.WithName(name)); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("CheckLockOptions(WithName(%q)): %v, want ErrInvalid", name, err)
		}
	}
	if n := cc.N(); n != 0 {
		t.Errorf("%d Redis commands for invalid names, want 0", n)
	}
	if err := (lock.Integration{}).CheckLockOptions(lock.WithName(strings.Repeat("n", lock.MaxNameLen))); err != nil {
		t.Errorf("a name of MaxNameLen bytes: %v", err)
	}
}

// TestObserverContexts: the Redis commands of a call run under the context
// AcquireStarted returned, those of an unlock under the one AcquireEnded
// returned, and the watchdog's under the one Background returned.
func TestObserverContexts(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	hook := markHook{marks: make(chan string, 1000)}
	rdb.AddHook(hook)
	c := locktest.NewClient(t, rdb, lock.WithObserver(&markingObserver{}))
	got := map[string]int{}
	drain := func() map[string]int {
		clear(got)
		for {
			select {
			case m := <-hook.marks:
				got[m]++
			default:
				return got
			}
		}
	}

	if got := drain(); len(got) != 1 || got["background"] == 0 { // New's CONFIG GET (see lock.New)
		t.Errorf("marks of New's commands: %v, want only background", got)
	}
	// A 150 ms lease (scaled off CI): no renewal comes before the
	// acquisition's marks are read.
	lctx, unlock := locktest.MustLock(t, c, context.Background(), "k", lock.WithLease(locktest.Bound(150*time.Millisecond)))
	if got := drain(); len(got) != 1 || got["call"] == 0 {
		t.Errorf("marks of the acquisition's commands: %v, want only call", got)
	}
	clear(got)
	// Renewals every third of the lease: wait for the first few.
	locktest.Eventually(t, 5*time.Second, "renewals", func() bool {
		for {
			select {
			case m := <-hook.marks:
				got[m]++
				continue
			default:
			}
			return got["background"] >= 2
		}
	})
	if len(got) != 1 {
		t.Errorf("marks of the watchdog's commands: %v, want only background", got)
	}
	clear(got)
	if lctx.Err() != nil {
		t.Fatalf("lease lost: %v", context.Cause(lctx))
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if got := drain(); got["hold"] == 0 || got[""] != 0 || got["call"] != 0 {
		t.Errorf("marks after renewals up to the unlock: %v, want hold (and background)", got)
	}
}

// TestEveryCommandUnderObserverContexts (Observer.Background: "the base of every Redis call the Client makes on
// its own ... and pub/sub"): whatever happens (a waiter subscribed, a
// cancelled wait, a Redis restart, hand-off, Close), every Redis command
// the Client sends runs under a context an Observer returned, so that
// otellock's mark keeps a tracing Redis client from starting traces. The
// restart makes the subscription reconnect: its HELLO and CLIENT SETINFO
// run in the Client's receive loop, under the Client's life context (not
// go-redis's channel goroutine, which works under context.TODO).
func TestEveryCommandUnderObserverContexts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	hook := markHook{marks: make(chan string, 100000)}
	rdb.AddHook(hook)
	c := locktest.NewClient(t, rdb, lock.WithObserver(&markingObserver{}))
	ctx := context.Background()

	_, unlock := locktest.MustLock(t, c, ctx, "k", lock.WithLease(2*time.Second))
	got := make(chan error, 1)
	go func() {
		_, u, err := c.Lock(ctx, "k", lock.WithMaxWait(10*time.Second))
		if err == nil {
			_ = u()
		}
		got <- err
	}()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, _, err := c.Lock(cctx, "k"); err == nil {
		t.Fatal("Lock of a held key succeeded before its deadline")
	}
	srv.Restart() // every connection broken; the key is gone
	_ = unlock()
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	unmarked := 0
	for len(hook.marks) > 0 {
		if <-hook.marks == "" {
			unmarked++
		}
	}
	if unmarked != 0 {
		t.Errorf("%d Redis commands ran under no context of the Observer", unmarked)
	}
}
