package ginlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// holdEnded returns the error of a hold on key, held, that ended before
// the chain returned (the lease lost, the Client closed), else nil;
// tracked says whether held reported the hold when it was taken (a
// Locker other than a lock.Client may give contexts that do not).
func holdEnded(held context.Context, key string, tracked bool) error {
	if !tracked || lock.Held(held, key) {
		return nil
	}
	if errors.Is(context.Cause(held), lock.ErrClosed) {
		return lock.ErrClosed
	}
	return lock.ErrLost
}

// release ends the request's hold once the chain has returned. The
// unlock, a Redis round trip, runs on a goroutine of its own, and release
// waits for it at most answerWait: on a Redis that answers, the key is
// free before the client reads the answer, so its next request, to any
// replica, is not turned away by this one; on a stalled Redis the answer
// is held back no longer, and the unlock goes on in the background,
// bounded as every unlock of the lock Client (1 s; an unconfirmed release
// then goes on in the Client's background and ends at Close). The outcome
// of the unlock reaches the Client's Observer, not the request.
func release(unlock lock.UnlockFunc) {
	done := make(chan struct{})
	releasing.Add(1)
	go func() {
		defer releasing.Add(-1)
		defer close(done)
		_ = unlock()
	}()
	t := time.NewTimer(answerWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// answerWait bounds how long an answer waits for its release: far above
// a release's round trip on a Redis that answers, far below the lock
// Client's 1 s bound of an unlock on a stalled one.
const answerWait = 100 * time.Millisecond

// releasing counts the releases still running in the background, which
// the package's tests wait for.
var releasing atomic.Int64
