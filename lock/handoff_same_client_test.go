package lock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
)

// attemptGate watches the attempts to acquire one lock hash (acquire.lua:
// 4 keys and 6 arguments) and, once armed, holds back the reply of the
// next one after Redis ran it, until open is closed: its caller learns
// late that it was queued, as when its goroutine is descheduled.
type attemptGate struct {
	key      string
	armed    atomic.Bool
	attempts atomic.Int64  // attempts sent since the gate was made
	ran      chan struct{} // closed once Redis ran the held attempt
	open     chan struct{} // closed to let its reply through
}

func (g *attemptGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *attemptGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (g *attemptGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) != 13 || args[3] != g.key {
			return next(ctx, cmd)
		}
		g.attempts.Add(1)
		if !g.armed.CompareAndSwap(true, false) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		close(g.ran)
		<-g.open
		return err
	}
}

// A release that hands the key to a waiter of its own Client sends no
// message: the release's reply tells the Client, which wakes the waiter.
// A waiter whose Client had no waiter of the key joins the Client's list
// of waiters only after its first attempt, which queued it in Redis; a
// release in between finds no one to wake. Here that attempt's reply is
// held back until w0's release handed the key to w: w must still get the
// key within milliseconds, not when the claim window or the holder's lease
// it was told of runs out, and before v, queued behind it.
func TestReleaseWakesTheNextWaiterOfTheSameClient(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	const key = "same-client"
	g := &attemptGate{key: "lockkit:{" + key + "}", ran: make(chan struct{}), open: make(chan struct{})}
	rdb.AddHook(g)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, key) // 30 s lease, no waiter: nothing subscribed

	g.armed.Store(true)
	doneW, w := lockAsync(c, ctx, key)
	locktest.Within(t, g.ran, 5*time.Second, "w's first attempt")
	// v finds no waiter of the key in its Client either (w has not
	// joined): it subscribes, and tries again once that is confirmed.
	n := g.attempts.Load()
	doneV, v := lockAsync(c, ctx, key)
	waitQueued(t, rdb, key, 2)
	locktest.Eventually(t, 5*time.Second, "v tried again once subscribed", func() bool { return g.attempts.Load() >= n+2 })

	if err := unlock(); err != nil { // hands the key to w, first in the queue
		t.Fatal(err)
	}
	released := time.Now()
	close(g.open)
	select {
	case <-doneW:
	case <-doneV:
		t.Fatalf("v, queued behind w, got the key first (after %v)", time.Since(released))
	case <-time.After(500 * time.Millisecond):
		t.Fatalf("w, handed the key by a release of its own Client, did not get it within 500 ms")
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
	t.Logf("w got the key %v after the release", w.at.Sub(released))
	if err := w.unlock(); err != nil {
		t.Fatal(err)
	}
	acquired(t, doneV, v, "v")
}
