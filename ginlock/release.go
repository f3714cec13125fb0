package ginlock

import (
	"context"
	"errors"
	"slices"
	"sync"
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

// release ends the request's hold on key once the chain has returned,
// without holding back the answer: the unlock, a Redis round trip, runs
// on a goroutine of its own, which the lock Client's unlock bounds (1 s
// on a stalled Redis; an unconfirmed release then goes on in the
// Client's background and ends at Close). The outcome of the unlock
// reaches the Client's Observer, not the request.
func release(key string, unlock lock.UnlockFunc) {
	releases.add(key)
	go func() {
		defer releases.done(key)
		_ = unlock()
	}()
}

// releases are this process's releases in flight, by lock key. A request
// for a key being released here waits for that release (see
// awaitRelease) instead of being turned away by a hold that has ended.
var releases = inFlight{n: map[string]int{}, idle: map[string]chan struct{}{}}

type inFlight struct {
	mu   sync.Mutex
	n    map[string]int           // releases of the key in flight
	idle map[string]chan struct{} // closed when n drops to 0; made for a waiter
}

func (r *inFlight) add(key string) {
	r.mu.Lock()
	r.n[key]++
	r.mu.Unlock()
}

func (r *inFlight) done(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n[key]--; r.n[key] > 0 {
		return
	}
	delete(r.n, key)
	if ch := r.idle[key]; ch != nil {
		delete(r.idle, key)
		close(ch)
	}
}

// wait returns a channel closed when no release of key is in flight, or
// nil when none is.
func (r *inFlight) wait(key string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n[key] == 0 {
		return nil
	}
	ch := r.idle[key]
	if ch == nil {
		ch = make(chan struct{})
		r.idle[key] = ch
	}
	return ch
}

// awaitRelease waits, for at most half of limit, for this process's
// release of key in flight, if any, unless ctx holds key already (a
// re-entry), and returns opts with what is left of limit for the
// acquisition: a request that follows another for the same key on this
// replica is not turned away by the release that the previous answer did
// not wait for, and the whole acquisition keeps its bound.
func awaitRelease(ctx context.Context, key string, limit time.Duration, opts []lock.LockOption) []lock.LockOption {
	idle := releases.wait(key)
	if idle == nil || lock.Held(ctx, key) {
		return opts
	}
	start := time.Now()
	t := time.NewTimer(limit / 2)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
	left := max(limit-time.Since(start), limit/2) // late timer: still positive
	return append(slices.Clip(opts), lock.WithMaxWait(left))
}
