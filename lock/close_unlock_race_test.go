package lock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

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
// goroutine is left waiting on Redis after Close returns.
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
	if r.at.After(closed) {
		t.Errorf("unlock returned %v after Close returned (Close took %v), want before", r.at.Sub(closed), closed.Sub(start))
	}
}
