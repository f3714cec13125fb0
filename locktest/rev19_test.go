package locktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/locktest"
)

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
