package lock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestEveryKeyHasTTLUnderForceChurn: Clients lock, re-enter, give up,
// let fixed leases lapse and unlock three keys while others force-unlock
// them (also IfHeldBy a holder seen a moment before) and Clients die with
// waiters queued (their Redis client closed first, so nothing is cleaned
// up). A checker scans every key of the prefix all along: none may ever
// be without a TTL.
func TestEveryKeyHasTTLUnderForceChurn(t *testing.T) {
	t.Parallel()
	srv, admin := newReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	keys := []string{"ttl-a", "ttl-b", "ttl-c"}
	clients := make([]*lock.Client, 3)
	for i := range clients {
		clients[i] = locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(time.Second))
	}
	var wg sync.WaitGroup
	var forced, conditional, taken, scans atomic.Int64
	worker := func(seed uint64, c *lock.Client) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 7))
		for ctx.Err() == nil {
			key := keys[r.IntN(len(keys))]
			switch r.IntN(6) {
			case 0: // force, maybe conditionally on the holder just seen
				var opts []lock.ForceOption
				if info, err := c.Inspect(ctx, key); err == nil && info.Held && r.IntN(2) == 0 {
					opts = append(opts, lock.IfHeldBy(info.Holder.ID))
				}
				if _, err := c.ForceUnlock(ctx, key, opts...); err == nil {
					forced.Add(1)
					conditional.Add(int64(len(opts)))
				}
			case 1: // a fixed lease left to lapse
				_, _, _ = c.Lock(ctx, key, lock.WithFixedLease(time.Duration(50+r.IntN(200))*time.Millisecond),
					lock.WithMaxWait(time.Duration(r.IntN(300))*time.Millisecond))
			default:
				held, unlock, err := c.Lock(ctx, key, lock.WithMaxWait(time.Duration(r.IntN(400))*time.Millisecond))
				if err != nil {
					continue
				}
				taken.Add(1)
				if r.IntN(3) == 0 {
					if _, inner, err := c.Lock(held, key); err == nil {
						time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
						_ = inner()
					}
				}
				time.Sleep(time.Duration(r.IntN(60)) * time.Millisecond)
				_ = unlock()
			}
		}
	}
	for i := range 9 {
		wg.Add(1)
		go worker(uint64(i), clients[i%len(clients)])
	}
	wg.Add(1)
	go func() { // Clients that die with waiters queued
		defer wg.Done()
		for ctx.Err() == nil {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			c, err := lock.New(rdb)
			if err != nil {
				t.Error(err)
				return
			}
			wctx, wcancel := context.WithCancel(context.Background())
			var waits sync.WaitGroup
			for _, key := range keys {
				waits.Add(1)
				go func() { defer waits.Done(); _, _, _ = c.Lock(wctx, key) }()
			}
			time.Sleep(150 * time.Millisecond)
			_ = rdb.Close()
			wcancel()
			waits.Wait()
			_ = c.Close()
		}
	}()
	bad := map[string]string{}
	for ctx.Err() == nil {
		names, err := admin.Keys(context.Background(), "lockkit:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if ttl, err := admin.PTTL(context.Background(), name).Result(); err == nil && ttl == -1 {
				if _, seen := bad[name]; !seen {
					bad[name] = admin.Type(context.Background(), name).Val()
					t.Errorf("%s (%s) has no TTL: %v", name, bad[name], admin.HGetAll(context.Background(), name).Val())
				}
			}
		}
		scans.Add(1)
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d scans; %d holds unlocked, %d force-unlocks (%d IfHeldBy)", scans.Load(), taken.Load(), forced.Load(), conditional.Load())
	if forced.Load() == 0 || conditional.Load() == 0 || taken.Load() == 0 {
		t.Error("the churn did not force, force conditionally and lock")
	}
}
