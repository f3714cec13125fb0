package lock_test

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

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// What the lock keeps in Redis: every key has a TTL, the queue and the
// waits hash agree, the queue's flag goes with it, long queues stay cheap.

// requireTTLs fails the test for every key in rdb without a TTL.
func requireTTLs(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl == -1 {
			t.Errorf("key %q has no TTL", k)
		}
	}
}

// fillQueue queues, behind a free key's hash, dead waiters of dead
// distinct Clients (deadline passed) and then live ones of live distinct
// Clients, with one pipeline.
func fillQueue(t *testing.T, rdb *redis.Client, key string, dead, live int) {
	t.Helper()
	ctx := context.Background()
	base := "lockkit:{" + key + "}"
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	pipe := rdb.Pipeline()
	for i := range dead {
		o := fmt.Sprintf("dead%d:1", i)
		pipe.RPush(ctx, base+":queue", o)
		pipe.HSet(ctx, base+":waits", o, now.Add(-time.Second).UnixMilli())
	}
	for i := range live {
		o := fmt.Sprintf("live%d:1", i)
		pipe.RPush(ctx, base+":queue", o)
		pipe.HSet(ctx, base+":waits", o, now.Add(time.Minute).UnixMilli())
	}
	pipe.PExpire(ctx, base+":queue", time.Minute)
	pipe.PExpire(ctx, base+":waits", time.Minute)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// slowestScript is how long Redis ran the slowest command since reset,
// by SLOWLOG (threshold 0).
func slowestScript(t *testing.T, rdb *redis.Client) time.Duration {
	t.Helper()
	ctx := context.Background()
	entries, err := rdb.SlowLogGet(ctx, 128).Result()
	if err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for _, e := range entries {
		if len(e.Args) > 0 && (e.Args[0] == "evalsha" || e.Args[0] == "EVALSHA" || e.Args[0] == "eval" || e.Args[0] == "EVAL") {
			worst = max(worst, e.Duration)
		}
	}
	return worst
}

// Once a key's wait queue is gone, its lock hash no longer flags one: an
// acquisition and a release look for no queue (no EXISTS in their
// scripts), as on a key that was never contended.
func TestQueueFlagGoesWithQueue(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "flag")
	done, res := lockAsync(c, ctx, "flag")
	waitQueued(t, rdb, "flag", 1)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, done, 5*time.Second, "the waiter")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if err := res.unlock(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		_, unlock := locktest.MustLock(t, c, ctx, "flag")
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
	}
	if n := locktest.CommandCalls(t, rdb, "exists"); n != 0 {
		t.Errorf("10 uncontended pairs after the queue went looked for a queue %d times, want 0", n)
	}
	if q := rdb.HGet(ctx, "lockkit:{flag}", "q").Val(); q == "1" {
		t.Errorf("the lock hash flags a queue (q = %q) after it went", q)
	}
}

// TestLeaveHandOffKeepsTTL: when the first waiter gives up after the
// holder's lease ran out (the lock hash is gone, the queue is not: it
// outlives the lease by the claim window), leave.lua hands the lock to the
// next waiter, and the hash it creates has a TTL: a dead waiter does not
// hold the key forever.
func TestLeaveHandOffKeepsTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	name := "lockkit:{stuck}"
	// A holder whose process died: its lease runs out later in the test.
	if err := rdb.HSet(ctx, name, "o", "deadholder@h:1:1", "n", 1, "t", 7).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, name, 30*time.Second)

	wrdb := srv.Client(t)
	sc := locktest.CountCommands(wrdb)
	w := locktest.NewClient(t, wrdb)
	_, unlockWarm := locktest.MustLock(t, w, ctx, "warm") // the scripts cached: one command per attempt
	if err := unlockWarm(); err != nil {
		t.Fatal(err)
	}
	warm := sc.Scripts()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, _, err := w.Lock(wctx, "stuck")
		done <- err
	}()
	// The waiter queued with its first attempt and, once subscribed, made
	// one more: it is idle now until the holder's lease would end, so no
	// attempt of its takes the key once the hash is gone.
	locktest.Eventually(t, 5*time.Second, "the waiter's two scripts answered", func() bool { return sc.Scripts() >= warm+2 })
	waitQueued(t, rdb, "stuck", 1)
	// A waiter behind it whose process died a moment ago: its deadline
	// (the lease left plus the claim window) is still ahead.
	tm, _ := rdb.Time(ctx).Result()
	now := tm.UnixMilli()
	dead := "deadwaiter@h:2:1"
	rdb.RPush(ctx, name+":queue", dead)
	rdb.HSet(ctx, name+":waits", dead, now+20000, ">"+dead, now)
	// The holder's lease ends (expiry deletes the hash), then the first
	// waiter gives up before its next attempt.
	rdb.Del(ctx, name)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v", err)
	}
	locktest.Eventually(t, 5*time.Second, "the lock handed to the next waiter", func() bool { return rdb.HGet(ctx, name, "o").Val() == dead })
	if ttl := rdb.PTTL(ctx, name).Val(); ttl < 0 {
		t.Fatalf("lock handed to %s with no TTL (PTTL %v): held forever by a dead waiter", dead, ttl)
	}
}

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

// TestWaitsHashMatchesQueueUnderChurn: under waiters that give up, time
// out and take hand-offs, the waits hash holds exactly a deadline and a
// joined time for each owner in the queue list (read atomically), and
// every key has a TTL, all along and at the end.
func TestWaitsHashMatchesQueueUnderChurn(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	var clients []*lock.Client
	for range 4 {
		clients = append(clients, locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(time.Second)))
	}
	check := redis.NewScript(`
for _, k in ipairs(KEYS) do
  if redis.call('PTTL', k) == -1 then return k .. ' has no TTL' end
end
local q = redis.call('LRANGE', KEYS[1], 0, -1)
local n = redis.call('HLEN', KEYS[2])
if n ~= 2 * #q then return 'HLEN ' .. n .. ' for ' .. #q .. ' queued' end
for _, w in ipairs(q) do
  if redis.call('HEXISTS', KEYS[2], w) == 0 or redis.call('HEXISTS', KEYS[2], '>' .. w) == 0 then
    return 'no fields for ' .. w
  end
end
return ''`)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[i%len(clients)]
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				wait := time.Duration(5+(i*7+j*13)%60) * time.Millisecond
				lctx, cancel := context.WithTimeout(ctx, wait)
				_, unlock, err := c.Lock(lctx, "churn")
				if err == nil {
					time.Sleep(time.Duration((i+j)%3) * time.Millisecond)
					_ = unlock()
				}
				cancel()
			}
		}()
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		msg, err := check.Run(ctx, rdb, []string{"lockkit:{churn}:queue", "lockkit:{churn}:waits", "lockkit:{churn}"}).Text()
		if err != nil {
			t.Fatal(err)
		}
		if msg != "" {
			close(stop)
			wg.Wait()
			t.Fatalf("waits hash out of step with the queue: %s", msg)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for _, k := range rdb.Keys(ctx, "*").Val() {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl == -1 {
			t.Errorf("%s has no TTL", k)
		}
	}
}

// Very long queues. The turn a missed hand-off starts is announced to
// every Client with a queued waiter (announce: LRANGE of the whole queue,
// one PUBLISH per Client): with 20 000 Clients queued the script still
// runs in well under 250 ms (it blocks all of Redis meanwhile). Dropping
// the waiters of Clients that missed their turn (first, run by any attempt
// and by the releasing Client's check) costs no LRANGE of the whole queue
// per dead Client: with 3000 dead Clients at the front (processes killed
// together, one waiter each) one script stays under 250 ms as well.
func TestLongQueueScriptTime(t *testing.T) {
	locktest.Timed(t)
	for _, tc := range []struct {
		name       string
		dead, live int
	}{
		{"announce to 20000 Clients", 1, 20000},
		{"drop 3000 dead Clients", 3000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := newReal(t)
			ctx := context.Background()
			c := locktest.NewClient(t, rdb)
			key := "ho-long"
			fillQueue(t, rdb, key, tc.dead, tc.live)
			if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.SlowLogReset(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			_, _, err := c.TryLock(ctx, key) // the attempt that drops them and announces the turn
			d := slowestScript(t, rdb)
			left := rdb.LLen(ctx, "lockkit:{"+key+"}:queue").Val()
			t.Logf("%d dead + %d live Clients queued: TryLock = %v; acquire.lua ran %v in Redis; %d left queued", tc.dead, tc.live, err, d, left)
			if left != int64(tc.live) {
				t.Fatalf("%d waiters left queued, want %d", left, tc.live)
			}
			if d > locktest.Bound(250*time.Millisecond) {
				t.Errorf("one acquire.lua blocked Redis for %v (%d dead Clients at the front, %d live behind)", d, tc.dead, tc.live)
			}
		})
	}
}
