package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// cycleStats counts where the cancellations of TestCancelledCycles hit.
type cycleStats struct {
	waits atomic.Int64 // Lock returned because the context was cancelled
	holds atomic.Int64 // the lock context was cancelled while held
	clean atomic.Int64 // held and unlocked with the context live
}

// TestCancelledCycles runs 1,000 lock/unlock cycles by 8 goroutines on 3
// keys through 2 Clients, each cycle's context cancelled at a random
// moment: before the acquisition, while it waits, during its Redis round
// trip (one Client's go-redis honours context deadlines, so a command can
// be cut off after Redis ran it), or while the lock is held. Afterwards no
// subscription, no lock key and, after Close, no goroutine may be left;
// only fencing counters stay.
//
// It does not run in parallel with other tests, so that goleak sees only
// its own goroutines.
func TestCancelledCycles(t *testing.T) {
	srv := redistest.Start(t)
	leaks := goleak.IgnoreCurrent()
	const cycles, goroutines = 1000, 8
	keys := []string{"cycle0", "cycle1", "cycle2"}

	var clients []*lock.Client
	var rdbs []*redis.Client
	for _, ctxTimeouts := range []bool{false, true} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: ctxTimeouts})
		c, err := lock.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		clients, rdbs = append(clients, c), append(rdbs, rdb)
	}
	var st cycleStats
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range cycles / goroutines {
				key := keys[rand.N(len(keys))]
				if err := cancelledCycle(clients[g%len(clients)], key, &st); err != nil {
					errs <- fmt.Errorf("%s: %w", key, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d cycles: %d waits cancelled, %d holds cancelled, %d clean", cycles, st.waits.Load(), st.holds.Load(), st.clean.Load())
	if st.waits.Load() == 0 || st.holds.Load() == 0 {
		t.Error("the cancellations did not hit both waits and holds")
	}

	check := redis.NewClient(&redis.Options{Addr: srv.Addr})
	requireNoSubscriptions(t, check, keys)
	requireNoneLeft(t, check)
	_ = check.Close()
	for i, c := range clients {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		_ = rdbs[i].Close()
	}
	goleak.VerifyNone(t, leaks)
}

// cancelledCycle locks key with a context cancelled after a random time up
// to 3 ms, holds the lock up to 1 ms and unlocks it.
func cancelledCycle(c *lock.Client, key string, st *cycleStats) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timer := time.AfterFunc(time.Duration(rand.N(3000))*time.Microsecond, cancel)
	defer timer.Stop()
	lctx, unlock, err := c.Lock(ctx, key)
	if err != nil {
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			return fmt.Errorf("Lock = %w; want ErrNotObtained joined with context.Canceled", err)
		}
		st.waits.Add(1)
		return nil
	}
	time.Sleep(time.Duration(rand.N(1000)) * time.Microsecond)
	cancelled := lctx.Err() != nil
	if err := unlock(); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	if cancelled {
		st.holds.Add(1)
	} else {
		st.clean.Add(1)
	}
	return nil
}

// requireNoSubscriptions waits up to a second for Redis to report no
// pub/sub channel subscribed (unsubscribing is asynchronous), then checks
// the release channels of keys one by one.
func requireNoSubscriptions(t *testing.T, rdb *redis.Client, keys []string) {
	t.Helper()
	ctx := context.Background()
	var chans []string
	// A Client keeps a key's subscription for a second after its last
	// waiter left.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if chans, err = rdb.PubSubChannels(ctx, "*").Result(); err != nil {
			t.Fatal(err)
		}
		if len(chans) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(chans) > 0 {
		t.Errorf("channels still subscribed: %q", chans)
	}
	for _, k := range keys {
		chans, err := rdb.PubSubChannels(ctx, lock.DefaultPrefix+":{"+k+"}:released*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(chans) != 0 {
			t.Errorf("channels of %q still subscribed: %q", k, chans)
		}
	}
}

// requireNoneLeft checks that every key left in Redis has a TTL and that
// none is left a second later: a released lock's hash stays free for a
// second at most, and the wait queue's keys go with their last waiter.
func requireNoneLeft(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(1500 * time.Millisecond)
	for {
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			return
		}
		for _, k := range keys {
			if ttl := rdb.PTTL(ctx, k).Val(); ttl == -1 {
				t.Fatalf("key %q left without a TTL", k)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys %q still there 1.5 s after the last unlock", keys)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
