package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Deadlines of lone calls on the caller's goroutine: a Client over a
// go-redis client with ContextTimeoutEnabled sends a lone script call on
// its caller's goroutine (pipe.boundsCalls), and go-redis ends it at the
// context's deadline.

// inlineClient returns a go-redis client of srv with ContextTimeoutEnabled
// and opt's other settings, closed when the test ends.
func inlineClient(t *testing.T, srv *redistest.Server, opt redis.Options) *redis.Client {
	t.Helper()
	opt.Addr = srv.Addr
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(&opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestCutOffByDeadlineIsNotObtained: a Lock or TryLock whose
// deadline cuts off its Redis call on a stalled Redis returns within the
// deadline + 100 ms with ErrNotObtained joined with DeadlineExceeded, as
// TestCallsKeepDeadlinesWhenRedisStalls requires for the default client.
// Here the go-redis client has ContextTimeoutEnabled and no retries
// (MaxRetries -1), so the lone call runs on the caller's goroutine and
// go-redis sets the socket's read deadline to the context's deadline.
// The read's i/o timeout and the context's own timer fire at the same
// instant, and the caller may run before the timer has cancelled the
// context: the call still counts as cut off by its context (see
// cutAtDeadline).
func TestCutOffByDeadlineIsNotObtained(t *testing.T) {
	locktest.Timed(t)
	srv := redistest.Start(t)
	rdb := inlineClient(t, srv, redis.Options{MaxRetries: -1})
	c := locktest.NewClient(t, rdb)
	if _, unlock, err := c.Lock(context.Background(), "warm"); err != nil { // loads the scripts, opens a connection
		t.Fatal(err)
	} else if err := unlock(); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	expectCutOff(t, "call", context.Background(), func(ctx context.Context, i int) error {
		var err error
		if i%2 == 0 {
			_, _, err = c.Lock(ctx, "k"+randKey())
		} else {
			_, _, err = c.TryLock(ctx, "k"+randKey())
		}
		return err
	})
}

// expectCutOff makes 30 calls of call, each under a context derived from
// parent with a 50 ms deadline that cuts it off on a stalled Redis, and
// fails t for each that took longer than the deadline + 100 ms (scaled
// by locktest.Bound) or did not report ErrNotObtained joined with
// DeadlineExceeded; what names the calls in the messages.
func expectCutOff(t *testing.T, what string, parent context.Context, call func(ctx context.Context, i int) error) {
	t.Helper()
	slack := locktest.Bound(slack)
	const limit = 50 * time.Millisecond
	const n = 30
	wrong := 0
	var first error
	for i := range n {
		ctx, cancel := context.WithTimeout(parent, limit)
		var err error
		took := timed(func() { err = call(ctx, i) })
		cancel()
		if took > limit+slack {
			t.Errorf("%s %d took %v with a %v deadline: %v", what, i, took, limit, err)
		}
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			wrong++
			if first == nil {
				first = err
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d %ss cut off by their deadline did not report ErrNotObtained and DeadlineExceeded; first: %v", wrong, n, what, first)
	}
}

// TestReentryCutOffByDeadlineIsNotObtained: a re-entry whose
// deadline cuts off its Redis call on a stalled Redis reports
// ErrNotObtained joined with DeadlineExceeded within the deadline + 100 ms,
// as TestReentryOnStalledRedisKeepsItsBound requires for the default
// client. With ContextTimeoutEnabled, go-redis ends the read at the
// deadline with an i/o timeout while the context's own timer, which fires
// at the same instant, may not have cancelled the context yet (about half
// of the calls, inline or queued); reenter tests cutOff right after the
// call, so it must see the context's error, not a bare "i/o timeout"
// (see cutAtDeadline). Rows: without go-redis's retries, and with them
// (whose backoff sleep sees the context's end).
func TestReentryCutOffByDeadlineIsNotObtained(t *testing.T) {
	locktest.Timed(t)
	for _, tc := range []struct {
		name    string
		retries int
	}{{"no retries", -1}, {"default retries", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := inlineClient(t, srv, redis.Options{MaxRetries: tc.retries})
			c := locktest.NewClient(t, rdb, lock.WithDefaultLease(30*time.Second))
			key := "reenter-" + randKey()
			lctx, _ := locktest.MustLock(t, c, context.Background(), key)
			srv.Pause()
			defer srv.Resume()
			expectCutOff(t, "re-entry", lctx, func(ctx context.Context, _ int) error {
				_, _, err := c.Lock(ctx, key)
				return err
			})
		})
	}
}
