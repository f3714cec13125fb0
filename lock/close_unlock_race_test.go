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
