package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestEveryCommandUnderObserverContexts (review of issue 18, item 2;
// Observer.Background: "the base of every Redis call the Client makes on
// its own ... and pub/sub"): whatever happens (a waiter subscribed, a
// cancelled wait, a Redis restart, hand-off, Close), every Redis command
// the Client sends runs under a context an Observer returned, so that
// otellock's mark keeps a tracing Redis client from starting traces.
//
// It fails after the restart: go-redis's PubSub channel goroutine, which
// the Client's subscription uses (ChannelWithSubscriptions), receives and
// reconnects under context.TODO; the new connection's HELLO and its
// CLIENT SETINFO pipeline run under no context of the Observer.
func TestEveryCommandUnderObserverContexts(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	hook := markHook{marks: make(chan string, 100000)}
	rdb.AddHook(hook)
	c := locktest.NewClient(t, rdb, lock.WithObserver(&markingObserver{}))
	ctx := context.Background()

	_, unlock := locktest.MustLock(t, c, ctx, "k", lock.WithLease(2*time.Second))
	got := make(chan error, 1)
	go func() {
		_, u, err := c.Lock(ctx, "k", lock.WithMaxWait(10*time.Second))
		if err == nil {
			_ = u()
		}
		got <- err
	}()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, _, err := c.Lock(cctx, "k"); err == nil {
		t.Fatal("Lock of a held key succeeded before its deadline")
	}
	srv.Restart() // every connection broken; the key is gone
	_ = unlock()
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	unmarked := 0
	for len(hook.marks) > 0 {
		if <-hook.marks == "" {
			unmarked++
		}
	}
	if unmarked != 0 { // HELLO, CLIENT SETINFO twice
		t.Errorf("%d Redis commands ran under no context of the Observer", unmarked)
	}
}
