package httpkit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// holdEnded returns the error of a hold on key, held, that ended before
// the handler returned (the lease lost, the Client closed):
// [lock.ErrLost] or [lock.ErrClosed], else nil. tracked says whether
// [lock.Held] reported the hold when it was taken (a Locker other than a
// lock.Client may give contexts that do not); an untracked hold never
// ended early.
func holdEnded(held context.Context, key string, tracked bool) error {
	if !tracked || lock.Held(held, key) {
		return nil
	}
	if errors.Is(context.Cause(held), lock.ErrClosed) {
		return lock.ErrClosed
	}
	return lock.ErrLost
}

// Release ends a request's hold once its handler has returned. The
// unlock, a Redis round trip, runs on a goroutine of its own, and Release
// waits for it at most [AnswerWait]: on a Redis that answers, the key is
// free before the client reads the answer, so its next request, to any
// replica, is not turned away by this one; on a stalled Redis the answer
// is held back no longer, and the unlock goes on in the background,
// bounded as every unlock of the lock Client (1 s; an unconfirmed release
// then goes on in the Client's background and ends at Close). The outcome
// of the unlock reaches the Client's Observer, not the request.
func Release(unlock lock.UnlockFunc) {
	done := make(chan struct{})
	releasing.Add(1)
	go func() {
		defer releasing.Add(-1)
		defer close(done)
		_ = unlock()
	}()
	t := time.NewTimer(AnswerWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// AnswerWait bounds how long [Release] holds the answer back: far above a
// release's round trip on a Redis that answers, far below the lock
// Client's 1 s bound of an unlock on a stalled one.
const AnswerWait = 100 * time.Millisecond

// releasing counts the unlocks of Release still running.
var releasing atomic.Int64

// ReleasesInFlight returns how many unlocks started by [Release] still
// run in the background, for tests that wait for them to end.
func ReleasesInFlight() int { return int(releasing.Load()) }
