package lock_test

import (
	"context"
	"sync"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// endRecorder is an Observer that notes when each outermost hold ended,
// and when each renewal batch was reported.
type endRecorder struct {
	mu       sync.Mutex
	ends     map[string]holdEnd
	renewals []renewalAt
}

func (r *endRecorder) Background(ctx context.Context) context.Context { return ctx }

func (r *endRecorder) AcquireStarted(ctx context.Context, a lock.Acquire) context.Context {
	return ctx
}

func (r *endRecorder) AcquireWaiting(context.Context, lock.Acquire) {}

func (r *endRecorder) AcquireEnded(_ context.Context, _ lock.Acquire, held context.Context) context.Context {
	return held
}

func (r *endRecorder) Released(_ context.Context, rel lock.Release) {
	if rel.Reentrant {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ends[rel.Key]; !ok {
		r.ends[rel.Key] = holdEnd{at: time.Now(), rel: rel}
	}
}

func (r *endRecorder) Renewed(rn lock.Renewal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewals = append(r.renewals, renewalAt{at: time.Now(), rn: rn})
}

func (r *endRecorder) end(key string) (holdEnd, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.ends[key]
	return e, ok
}

// firstConfirmed returns when the first renewal batch reported after t
// without an error was reported.
func (r *endRecorder) firstConfirmed(after time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.renewals {
		if x.at.After(after) && x.rn.Err == nil && x.rn.Lost == 0 {
			return x.at, true
		}
	}
	return time.Time{}, false
}

// sentBefore and sentAfter count the renewal batches sent before t, and
// after it: a batch is sent its Duration before it is reported.
func (r *endRecorder) sentBefore(t time.Time) int { return r.sent(t, false) }

func (r *endRecorder) sentAfter(t time.Time) int { return r.sent(t, true) }

func (r *endRecorder) sent(t time.Time, after bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.renewals {
		if x.at.Add(-x.rn.Duration).After(t) == after {
			n++
		}
	}
	return n
}

type holdEnd struct {
	at  time.Time
	rel lock.Release
}

type renewalAt struct {
	at time.Time
	rn lock.Renewal
}

func newEndRecorder() *endRecorder { return &endRecorder{ends: make(map[string]holdEnd)} }
