package locktest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

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
