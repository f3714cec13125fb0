package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// The key is handed to a dead waiter (deadA) and the releasing Client
// closes. W1 and the live waiter L2 behind it are two Lock calls of one
// Client C; C's first local waiter, W1, takes the notice to check the
// hand-off, then gives up before its check is due. A waiter leaves this
// process's queue of the key before it leaves the queue in Redis, so that
// what leaving tells C reaches L2, and passes on a check it was to make:
// L2 must get the key within two claim windows ("whatever other waiters
// do", also when the releasing process closes). A race per key when it
// failed (about half the time): three keys at once, and C's other work
// keeps its pipe busy.
func TestLocalWatcherLeavingPassesItsCheck(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	holder, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	c := locktest.NewClient(t, srv.Client(t))

	const n = 3
	var keys [n]string
	var unlocks [n]lock.UnlockFunc
	var lives [n]<-chan struct{}
	var results [n]*lockResult
	var wdones [n]<-chan struct{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		key := fmt.Sprintf("local-watcher-%s-%d", randKey(), i)
		keys[i] = key
		_, unlocks[i] = locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
		queueDeadWaiter(t, rdb, key, "deadA:1")
		wdones[i], _ = lockAsync(c, wctx, key)
		waitQueued(t, rdb, key, 2)
		lives[i], results[i] = lockAsync(c, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
		waitQueued(t, rdb, key, 3)
		queueDeadWaiter(t, rdb, key, "deadX:1")
		waitQueued(t, rdb, key, 4)
		waitSubscribed(t, rdb, key, 1)
	}
	time.Sleep(50 * time.Millisecond)

	for i := range n {
		if err := unlocks[i](); err != nil {
			t.Fatal(err)
		}
	}
	handed := time.Now()
	_ = holder.Close()
	for _, key := range keys {
		if o := ownerIn(t, rdb, key); o != "deadA:1" {
			t.Fatalf("premise: the key went to %q, want deadA:1", o)
		}
	}
	// C's other work keeps its pipe busy: leave.lua's reply comes back in a
	// pipeline with other calls' replies, a little after the message it
	// published reaches C's subscriber.
	stop := make(chan struct{})
	busy := make(chan struct{})
	for i := range 4 {
		go func() {
			defer func() { busy <- struct{}{} }()
			k := fmt.Sprintf("local-watcher-busy-%s-%d", randKey(), i)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, u, err := c.TryLock(ctx, k); err == nil {
					_ = u()
				}
			}
		}()
	}
	time.Sleep(400*time.Millisecond - time.Since(handed))
	cancel() // the W1s give up well within the receivers' windows
	for i := range n {
		locktest.Within(t, wdones[i], time.Second, "W1 giving up")
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	for range 4 {
		<-busy
	}
	for _, key := range keys {
		if !locktest.Held(t, rdb, "lockkit:{"+key+"}") {
			t.Fatal("premise: a receiver's window lapsed before W1 gave up")
		}
	}
	for i := range n {
		waitTaken(t, lives[i], results[i], handed, 2500*time.Millisecond, fmt.Sprintf("the live waiter L2 of key %d", i))
	}
}
