package locktest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/locktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewGivesAWorkingClient(t *testing.T) {
	c := locktest.New(t, lock.WithOwnerLabel("test"))
	ctx, unlock, err := c.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.TryLock(context.Background(), "k"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock of a held key: %v", err)
	}
	info, err := c.Inspect(ctx, "k")
	if err != nil || !info.Held || info.Holder.Label != "test" {
		t.Fatalf("Inspect: %+v, %v", info, err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	rec := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }() // Fatalf of the recorder ends the call
		locktest.New(rec, lock.WithPrefix(""))
	}()
	if !strings.Contains(rec.msg, "prefix") {
		t.Fatalf("New with a bad option reported %q", rec.msg)
	}
}

func TestLoseCancelsTheHolder(t *testing.T) {
	c := locktest.New(t)
	ctx, unlock, err := c.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := lock.FencingToken(ctx, "k")
	locktest.Lose(t, c, "k")
	if context.Cause(ctx) != lock.ErrLost {
		t.Fatalf("cause %v, want ErrLost", context.Cause(ctx))
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("unlock: %v, want ErrLost", err)
	}
	next, unlockNext, err := c.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer unlockNext()
	if after, _ := lock.FencingToken(next, "k"); after <= before {
		t.Fatalf("token after the loss %d, want more than %d", after, before)
	}
}

func TestLoseOfAFreeKeyFails(t *testing.T) {
	rec := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		locktest.Lose(rec, locktest.New(t), "free")
	}()
	if !strings.Contains(rec.msg, "not held") {
		t.Fatalf("Lose of a free key reported %q", rec.msg)
	}
}

func TestContend(t *testing.T) {
	c := locktest.New(t)
	var inside, most, calls atomic.Int32
	locktest.Contend(t, 16, func(i int) error {
		calls.Add(1)
		_, unlock, err := c.Lock(context.Background(), "k")
		if err != nil {
			return err
		}
		defer unlock()
		n := inside.Add(1)
		if n > most.Load() {
			most.Store(n)
		}
		inside.Add(-1)
		return nil
	})
	if calls.Load() != 16 || most.Load() != 1 {
		t.Fatalf("%d calls, at most %d inside at once; want 16 and 1", calls.Load(), most.Load())
	}
	rec := &recorder{TB: t}
	locktest.Contend(rec, 3, func(i int) error {
		if i == 1 {
			return fmt.Errorf("call %d failed", i)
		}
		return nil
	})
	if !strings.Contains(rec.msg, "call 1 failed") {
		t.Fatalf("Contend reported %q", rec.msg)
	}
}

// recorder records the failure a helper reports instead of failing the
// test; its Fatalf ends the calling function with a panic.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

// TestLoseReentrantHoldAndWaiter: Lose ends every level of a re-entered
// hold at once, and the Client's own queued waiter gets the key.
func TestLoseReentrantHoldAndWaiter(t *testing.T) {
	c := locktest.New(t)
	bg := context.Background()
	outer, unlockOuter, err := c.Lock(bg, "k")
	if err != nil {
		t.Fatal(err)
	}
	inner, unlockInner, err := c.Lock(outer, "k")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := lock.FencingToken(inner, "k")
	got := make(chan uint64, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		lctx, unlock, err := c.Lock(ctx, "k")
		if err != nil {
			t.Errorf("waiter: %v", err)
			got <- 0
			return
		}
		tok, _ := lock.FencingToken(lctx, "k")
		_ = unlock()
		got <- tok
	}()
	for start := time.Now(); ; time.Sleep(2 * time.Millisecond) {
		info, err := c.Inspect(bg, "k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiting == 1 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("waiter never queued")
		}
	}
	locktest.Lose(t, c, "k")
	if context.Cause(inner) != lock.ErrLost || context.Cause(outer) != lock.ErrLost {
		t.Fatalf("after Lose: inner %v, outer %v", context.Cause(inner), context.Cause(outer))
	}
	if err := unlockInner(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("inner unlock: %v", err)
	}
	if err := unlockOuter(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("outer unlock: %v", err)
	}
	if tok := <-got; tok <= before {
		t.Fatalf("waiter's token %d, want more than %d", tok, before)
	}
}

// Clients of one Server exclude each other and hand a key over in turn,
// as replicas sharing one Redis do.
func TestReplicasShareTheServer(t *testing.T) {
	srv := locktest.NewServer(t)
	a, b := srv.Client(), srv.Client()
	ctx, unlock, err := a.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	first, _ := lock.FencingToken(ctx, "k")
	got := make(chan uint64, 1)
	go func() {
		bctx, bunlock, err := b.Lock(context.Background(), "k", lock.WithMaxWait(10*time.Second))
		if err != nil {
			t.Error(err)
			got <- 0
			return
		}
		tok, _ := lock.FencingToken(bctx, "k")
		got <- tok
		_ = bunlock()
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		info, err := a.Inspect(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Waiters) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second replica is not queued: %+v", info)
		}
	}
	select {
	case <-got:
		t.Fatal("the second replica obtained a held key")
	default:
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case tok := <-got:
		if tok <= first {
			t.Fatalf("token %d after %d, want larger", tok, first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting replica did not get the released key")
	}
}

// FastForward past a lease ends it in Redis: the holder is told at its next
// renewal, and another replica obtains the key with a larger token.
func TestFastForwardLapsesALease(t *testing.T) {
	srv := locktest.NewServer(t)
	holder, other := srv.Client(), srv.Client()
	ctx, unlock, err := holder.Lock(context.Background(), "k", lock.WithLease(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := lock.FencingToken(ctx, "k")
	srv.FastForward(time.Second)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told of the lapsed lease")
	}
	if cause := context.Cause(ctx); cause != lock.ErrLost {
		t.Fatalf("cause %v, want ErrLost", cause)
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("unlock: %v, want ErrLost", err)
	}
	octx, ounlock, err := other.TryLock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer ounlock()
	if tok, _ := lock.FencingToken(octx, "k"); tok <= first {
		t.Fatalf("token %d after %d, want larger", tok, first)
	}
}

// A Server of StartServer closes its Clients with it, once.
func TestStartServerClosesItsClients(t *testing.T) {
	srv, err := locktest.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	c := srv.Client()
	srv.Close()
	srv.Close()
	if _, _, err := c.TryLock(context.Background(), "k"); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("TryLock after Close: %v, want ErrClosed", err)
	}
}
