package lock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestHeldPatternMatchesEscapedKeys: Held's pattern is a glob over the
// user's keys, but it is matched against the escaped names in Redis, so
// '?' and classes miss keys with '%', '{' or '}' (stored as three bytes).
func TestHeldPatternMatchesEscapedKeys(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	for _, tc := range []struct{ key, pattern string }{
		{"a%", "a?"},
		{"b{", "b?"},
		{"c}", "c[}]"},
		{"d%", "d[%]"},
	} {
		_, unlock := locktest.MustLock(t, c, ctx, tc.key)
		found := false
		for info, err := range c.Held(ctx, tc.pattern) {
			if err != nil {
				t.Fatalf("Held(%q): %v", tc.pattern, err)
			}
			found = found || info.Key == tc.key
		}
		if !found {
			t.Errorf("Held(%q) does not list the held key %q", tc.pattern, tc.key)
		}
		_ = unlock()
	}
}

// TestLeaveHandOffKeepsTTL: when the first waiter gives up after the
// holder's lease ran out (the lock hash is gone, the queue is not: it
// outlives the lease by the claim window), leave.lua hands the lock to the
// next waiter with PEXPIRE before HSET on a missing key, so the new hash
// has no TTL: if that waiter's process is dead the key is held forever.
func TestLeaveHandOffKeepsTTL(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	name := "lockkit:{stuck}"
	// A holder whose process died: its lease runs out later in the test.
	if err := rdb.HSet(ctx, name, "o", "deadholder@h:1:1", "n", 1, "t", 7).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, name, 30*time.Second)

	w := locktest.NewClient(t, rdb)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, _, err := w.Lock(wctx, "stuck")
		done <- err
	}()
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
	deadline := time.Now().Add(5 * time.Second)
	for rdb.HGet(ctx, name, "o").Val() != dead {
		if time.Now().After(deadline) {
			t.Fatalf("the lock was not handed to the next waiter: %v", rdb.HGetAll(ctx, name).Val())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if ttl := rdb.PTTL(ctx, name).Val(); ttl < 0 {
		t.Fatalf("lock handed to %s with no TTL (PTTL %v): held forever by a dead waiter", dead, ttl)
	}
}

// TestOperatorCallsBoundedWhenRedisStalls: Inspect, Held and ForceUnlock
// return within their context's deadline (+100 ms) while Redis does not
// answer.
func TestOperatorCallsBoundedWhenRedisStalls(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "k")
	defer unlock()
	srv.Pause()
	defer srv.Resume()
	const limit = 300 * time.Millisecond
	for name, call := range map[string]func(context.Context) error{
		"Inspect": func(ctx context.Context) error { _, err := c.Inspect(ctx, "k"); return err },
		"ForceUnlock": func(ctx context.Context) error {
			_, err := locktest.NewClient(t, rdb).ForceUnlock(ctx, "k")
			return err
		},
		"Held": func(ctx context.Context) error {
			for _, err := range c.Held(ctx, "*") {
				if err != nil {
					return err
				}
			}
			return nil
		},
	} {
		cctx, cancel := context.WithTimeout(ctx, limit)
		start := time.Now()
		err := call(cctx)
		took := time.Since(start)
		cancel()
		if err == nil || took > limit+100*time.Millisecond {
			t.Errorf("%s on a stalled Redis: %v after %v, want an error within %v", name, err, took, limit+100*time.Millisecond)
		}
	}
}

// TestHeldClusterMasterStalled: Held on a Redis Cluster with one master
// stalled ends with an error within its context's deadline.
func TestHeldClusterMasterStalled(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		_, unlock := locktest.MustLock(t, c, ctx, k)
		defer unlock()
	}
	cl.Masters[1].Pause()
	defer cl.Masters[1].Resume()
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	var err error
	n := 0
	for _, e := range c.Held(cctx, "*") {
		if e != nil {
			err = e
			break
		}
		n++
	}
	if took := time.Since(start); err == nil || took > 600*time.Millisecond {
		t.Fatalf("Held with a master stalled: %d listed, %v after %v", n, err, took)
	}
}

// TestWaitsHashMatchesQueueUnderChurn: under waiters that give up, time
// out and take hand-offs, the waits hash holds exactly a deadline and a
// joined time for each owner in the queue list (read atomically), and
// every key has a TTL.
func TestWaitsHashMatchesQueueUnderChurn(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	var clients []*lock.Client
	for range 4 {
		clients = append(clients, locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(time.Second)))
	}
	check := redis.NewScript(`
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
		msg, err := check.Run(ctx, rdb, []string{"lockkit:{churn}:queue", "lockkit:{churn}:waits"}).Text()
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

// TestInspectTurnSkipsDeadClientsWaiters: a waiter that missed its turn
// marks its Client dead, and the next attempt drops every waiter of that
// Client (queue.lua's first); Inspect instead reports the free key as
// reserved for that dead Client's next waiter.
func TestInspectTurnSkipsDeadClientsWaiters(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	tm, _ := rdb.Time(ctx).Result()
	now := tm.UnixMilli()
	name := "lockkit:{turn}"
	// A process died with two queued waiters; a live one waits behind them.
	a1, a2, b1 := "deadA@h:1:1", "deadA@h:1:2", "liveB@h:2:1"
	rdb.RPush(ctx, name+":queue", a1, a2, b1)
	rdb.HSet(ctx, name+":waits", a1, now-10, ">"+a1, now-5000, a2, now+20000, ">"+a2, now-4000, b1, now+20000, ">"+b1, now-3000)
	rdb.PExpire(ctx, name+":queue", 30*time.Second)
	rdb.PExpire(ctx, name+":waits", 30*time.Second)

	info, err := c.Inspect(ctx, "turn")
	if err != nil {
		t.Fatal(err)
	}
	// What Redis does on the next attempt: a2 is dropped with a1.
	if _, _, err := c.TryLock(ctx, "turn"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock: %v", err)
	}
	after, _ := c.Inspect(ctx, "turn")
	if info.ReservedFor.ID != b1 {
		t.Fatalf("Inspect: reserved for %q (turn left %v), but the next attempt gives the turn to %q (then Inspect says %q)", info.ReservedFor.ID, info.TurnLeft, b1, after.ReservedFor.ID)
	}
}

// TestQuorumHeldWithNodeDown: quorum mode works with a minority of nodes
// down, and so does Inspect, but Held stops at the first node that does
// not answer: with the first of three nodes down it lists nothing, even
// locks held on the two others.
func TestQuorumHeldWithNodeDown(t *testing.T) {
	srvs, clients := quorumOf(t, 3)
	ctx := context.Background()
	c := newQuorum(t, clients())
	_, unlock := locktest.MustLock(t, c, ctx, "q")
	defer unlock()
	srvs[0].Stop()
	if info, err := c.Inspect(ctx, "q"); err != nil || !info.Held {
		t.Fatalf("Inspect with a node down: %+v %v", info, err)
	}
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	listed := 0
	var errs []error
	for info, err := range c.Held(hctx, "*") {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if info.Key == "q" {
			listed++
		}
	}
	if listed < 2 {
		t.Fatalf("Held with one node of three down listed q on %d nodes (errors %v), want the 2 that answer", listed, errs)
	}
}

// TestForceUnlockFixedLeaseHolderHearsIt: a hold with WithFixedLease has
// no watchdog, so after another Client's ForceUnlock nothing tells it:
// its context runs on, as if it held the key, until the fixed lease
// ends, while the next holder works (ForceUnlock's doc promises ErrLost
// at the next renewal, within a third of the lease).
func TestForceUnlockFixedLeaseHolderHearsIt(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	held, unlock := locktest.MustLock(t, a, ctx, "fixed", lock.WithFixedLease(9*time.Second))
	defer unlock()
	op := locktest.NewClient(t, srv.Client(t))
	if _, err := op.ForceUnlock(ctx, "fixed"); err != nil {
		t.Fatal(err)
	}
	next, unlockNext := locktest.MustLock(t, op, ctx, "fixed")
	defer unlockNext()
	select {
	case <-held.Done():
		if !errors.Is(context.Cause(held), lock.ErrLost) {
			t.Fatalf("old hold ended with %v", context.Cause(held))
		}
	case <-time.After(3*time.Second + 500*time.Millisecond):
		_, still := lock.FencingToken(held, "fixed")
		tok, _ := lock.FencingToken(next, "fixed")
		t.Fatalf("3.5 s after ForceUnlock the fixed-lease holder still runs (FencingToken ok %v) while the next holder has token %d", still, tok)
	}
}

// TestForceUnlockToFrozenWaiterDoesNotStall: a release that hands the
// key to another Client's waiter checks after the claim window that it
// was taken (checkLater), and gives the next live waiter its turn;
// ForceUnlock hands over the same way but never checks. When the waiter
// it handed the key to is in a frozen process, and no other Client's
// waiter is right behind it or last (the ones told to check), a live
// waiter further back waits until its own deadline: the holder's whole
// lease, not a claim window.
func TestForceUnlockToFrozenWaiterDoesNotStall(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	name := "lockkit:{frozen}"
	// The holder and three waiters of a frozen process; a live waiter
	// queues after its first two.
	frozen := func(seq int) string { return "frozenprocess@h:1:" + strconv.Itoa(seq) }
	if err := rdb.HSet(ctx, name, "o", frozen(1), "n", 1, "t", 7, "q", 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, name, 20*time.Second)
	tm, _ := rdb.Time(ctx).Result()
	now := tm.UnixMilli()
	queue := func(o string) {
		rdb.RPush(ctx, name+":queue", o)
		rdb.HSet(ctx, name+":waits", o, now+21000, ">"+o, now)
		rdb.PExpire(ctx, name+":queue", 21*time.Second)
		rdb.PExpire(ctx, name+":waits", 21*time.Second)
	}
	queue(frozen(2))
	queue(frozen(3))
	live := locktest.NewClient(t, srv.Client(t))
	got := make(chan time.Time, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		_, unlock, err := live.Lock(lctx, "frozen")
		if err == nil {
			_ = unlock()
		}
		got <- time.Now()
	}()
	waitQueued(t, rdb, "frozen", 3)
	queue(frozen(4))

	op := locktest.NewClient(t, srv.Client(t))
	f, err := op.ForceUnlock(ctx, "frozen")
	if err != nil {
		t.Fatal(err)
	}
	forced := time.Now()
	if f.HandedTo.ID != frozen(2) {
		t.Fatalf("handed to %q", f.HandedTo.ID)
	}
	select {
	case at := <-got:
		if at.Sub(forced) > 3*time.Second {
			t.Fatalf("the live waiter got the key %v after ForceUnlock", at.Sub(forced))
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the live waiter still waits 3 s after ForceUnlock handed the key to a frozen waiter (claim window 1 s)")
	}
}

// TestQuorumForceUnlockStalledNodes: with one node of three stalled,
// ForceUnlock ends the hold on the two others and the holder loses the
// key at its next renewal. With two stalled it reports success all the
// same, although the holder keeps its majority: once the nodes answer
// again its renewals go through and it keeps the key (quorum mode has no
// fencing tokens to stop its writes). It should then fail.
func TestQuorumForceUnlockStalledNodes(t *testing.T) {
	for _, stalled := range []int{1, 2} {
		t.Run(strconv.Itoa(stalled), func(t *testing.T) {
			srvs, clients := quorumOf(t, 3)
			ctx := context.Background()
			x := newQuorum(t, clients(), lock.WithDefaultLease(3*time.Second))
			held, unlock := locktest.MustLock(t, x, ctx, "q")
			defer unlock()
			op := newQuorum(t, clients(), lock.WithNodeTimeout(100*time.Millisecond))
			for _, s := range srvs[3-stalled:] {
				s.Pause()
			}
			fctx, cancel := context.WithTimeout(ctx, time.Second)
			start := time.Now()
			f, err := op.ForceUnlock(fctx, "q")
			took := time.Since(start)
			cancel()
			for _, s := range srvs[3-stalled:] {
				s.Resume()
			}
			switch {
			case took > 1100*time.Millisecond:
				t.Fatalf("ForceUnlock took %v with a deadline of 1 s", took)
			case err != nil && stalled == 1:
				t.Fatalf("ForceUnlock with one node stalled: %v", err)
			case err != nil:
				return // refused without a majority: right
			}
			// ForceUnlock said the hold was ended: the holder must lose it.
			select {
			case <-held.Done():
				if !errors.Is(context.Cause(held), lock.ErrLost) {
					t.Fatalf("hold ended with %v", context.Cause(held))
				}
			case <-time.After(6 * time.Second): // two leases: several renewals
				info, _ := op.Inspect(ctx, "q")
				t.Fatalf("ForceUnlock reported %+v (nil error) with %d nodes of three stalled; the holder still holds the key 6 s later: %v", f, stalled, info.Holder)
			}
		})
	}
}

// TestForceUnlockTokenAfterHashExpired: after a force-unlock with no
// waiter the hash keeps the last token about a second, then lapses; the
// next token (from Redis's clock) is still larger than the old holder's,
// also when the old one came from a long chain of hand-offs.
func TestForceUnlockTokenAfterHashExpired(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	var last uint64
	for range 50 { // a chain of holds within the linger: tokens +1 each
		held, unlock := locktest.MustLock(t, c, ctx, "chain")
		last, _ = lock.FencingToken(held, "chain")
		_ = unlock()
	}
	held, unlock := locktest.MustLock(t, c, ctx, "chain")
	defer unlock()
	old, _ := lock.FencingToken(held, "chain")
	if old != last+1 {
		t.Fatalf("chain: %d after %d", old, last)
	}
	if _, err := locktest.NewClient(t, rdb).ForceUnlock(ctx, "chain"); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); rdb.Exists(ctx, "lockkit:{chain}").Val() == 1; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 3*time.Second {
			t.Fatal("the forced hash never lapsed")
		}
	}
	next, unlockNext := locktest.MustLock(t, c, ctx, "chain")
	defer unlockNext()
	if tok, _ := lock.FencingToken(next, "chain"); tok <= old {
		t.Fatalf("token %d after the hash lapsed, old holder's %d", tok, old)
	}
}

// TestLabelsWithSeparatorsHandOff: labels may hold ':' and '@' (the
// separators of owner ids): hand-offs between such Clients, the
// dead-Client logic that cuts owners at their last ':', and Inspect's
// parsing still work.
func TestLabelsWithSeparatorsHandOff(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t), lock.WithOwnerLabel("a:1@b:2"))
	b := locktest.NewClient(t, srv.Client(t), lock.WithOwnerLabel("9:9"))
	_, unlock := locktest.MustLock(t, a, ctx, "sep")
	got := make(chan error, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, u, err := b.Lock(lctx, "sep")
		if err == nil {
			err = u()
		}
		got <- err
	}()
	waitQueued(t, srv.Client(t), "sep", 1)
	info, err := b.Inspect(ctx, "sep")
	if err != nil || info.Holder.Label != "a:1@b:2" || len(info.Waiters) != 1 || info.Waiters[0].Owner.Label != "9:9" {
		t.Fatalf("Inspect: %+v %v", info, err)
	}
	start := time.Now()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil || time.Since(start) > time.Second {
		t.Fatalf("hand-off to the waiter: %v after %v", err, time.Since(start))
	}
}
