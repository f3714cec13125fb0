package locktest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// poll is how often Eventually checks its condition.
const poll = 2 * time.Millisecond

// Eventually checks cond every 2 ms until it holds and returns how long
// that took; after limit it fails t (Fatal), naming what it waited for.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(poll)
	}
	return time.Since(start)
}

// Within waits up to limit for ch to be closed (or to deliver) and
// returns how long that took; after limit it fails t (Fatal).
func Within(t testing.TB, ch <-chan struct{}, limit time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	if !ClosedWithin(ch, limit) {
		t.Fatalf("%s: not within %v", what, limit)
	}
	return time.Since(start)
}

// ClosedWithin waits up to limit for ch to be closed (or to deliver) and
// reports whether it was, for a test that says more than Within does when
// it was not.
func ClosedWithin(ch <-chan struct{}, limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-ch:
		return true
	case <-timer.C:
		return false
	}
}

// Waited returns a channel closed when wg's Wait returns.
func Waited(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch
}

// Cause waits up to limit for ctx to be done and returns its cause;
// after limit it fails t (Fatal).
func Cause(t testing.TB, ctx context.Context, limit time.Duration) error {
	t.Helper()
	Within(t, ctx.Done(), limit, "context done")
	return context.Cause(ctx)
}
