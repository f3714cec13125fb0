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
	"github.com/lockkit/lockkit/lock"
)

// The pipe under faults: stalled senders do not hold the queue, calls do
// not wait for other round trips, cancellation races senders.

// latency is a go-redis hook that delays every command and pipeline by d
// before sending it, as a distant Redis would; a context that ends first
// fails the call.
type latency struct{ d time.Duration }

func (l latency) wait(ctx context.Context) error {
	t := time.NewTimer(l.d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l latency) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l latency) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := l.wait(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (l latency) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := l.wait(ctx); err != nil {
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// While both senders' commands hang (a connection that stopped answering),
// a call of another key still gets through, on a sender started for the
// stalled queue, within milliseconds; a call that then hangs too returns
// at its deadline.
func TestStalledSendersDoNotHoldQueue(t *testing.T) {
	locktest.Timed(t)
	_, rdb := newReal(t)
	w := &wire{hold: "lockkit:{pipe-stuck}", free: make(chan struct{})}
	rdb.AddHook(w)
	c := locktest.NewClient(t, rdb)
	warm(t, c)
	ctx := context.Background()
	stuck := make(chan error, 2)
	for i := range 2 { // both senders hang on the same held-back key, one after the other
		go func() {
			_, _, err := c.TryLock(ctx, "pipe-stuck")
			stuck <- err
		}()
		awaitTakes(t, w, "lockkit:{pipe-stuck}", i+1)
	}

	start := time.Now()
	_, unlock, err := c.Lock(ctx, "pipe-free")
	took := time.Since(start)
	t.Logf("a call behind two stuck senders got its key in %v", took)
	if err != nil {
		t.Fatal(err)
	}
	if took > locktest.Bound(50*time.Millisecond) {
		t.Errorf("a call behind two stuck senders took %v, want a few ms (a sender starts after 1 ms)", took)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, _, err = c.Lock(short, "pipe-stuck")
	took = time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call with a 20 ms deadline that hangs too: %v, want context.DeadlineExceeded", err)
	}
	if took > 20*time.Millisecond+locktest.Bound(slack) {
		t.Errorf("a call with a 20 ms deadline that hangs too returned after %v", took)
	}
	close(w.free)
	for range 2 {
		if err := <-stuck; err != nil && !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("held-back TryLock: %v", err)
		}
	}
}

// On a Redis 100 ms away, calls that come while both senders wait for
// their round trips do not wait for those to end: each is sent within a
// few milliseconds, so a 150 ms lease, whose validity a call that waited
// for a round trip before its own would outlast, is still obtained by
// every one of six concurrent callers, again and again.
func TestCallsDoNotWaitForOtherRoundTrips(t *testing.T) {
	locktest.Timed(t)
	_, rdb := newReal(t)
	// The round trip scales with a busy machine, up to 400 ms: an unlock
	// waits at most 1 s for its two (NOSCRIPT, then EVAL).
	rtt := min(locktest.Bound(100*time.Millisecond), 400*time.Millisecond)
	rdb.AddHook(latency{rtt})
	c := locktest.NewClient(t, rdb)
	warm(t, c)
	lease := rtt * 3 / 2
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("pipe-slow-%d", i)
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), locktest.Bound(time.Second))
				start := time.Now()
				_, unlock, err := c.Lock(ctx, key, lock.WithLease(lease))
				took := time.Since(start)
				cancel()
				if err != nil {
					t.Errorf("%s: a %v lease over a %v round trip, after %v: %v", key, lease, rtt, took, err)
					return
				}
				_ = unlock()
			}
		}()
	}
	wg.Wait()
}

// Many goroutines of two Clients call Lock and TryLock with deadlines of
// 0-15 ms, so contexts end while their requests are queued, taken by a
// sender, in a pipeline, or answered (requests are reused). Mutual
// exclusion holds, no call overruns its deadline by 100 ms, and afterwards
// every key is obtainable at once (nothing left behind blocks it longer
// than a claim window).
func TestCallsCutOffInThePipeLeaveNothingBehind(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	const nkeys = 3
	var inside [nkeys]atomic.Int32
	var got atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for i := range 32 {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for time.Now().Before(stop) {
				k := r.IntN(nkeys)
				key := fmt.Sprintf("cancel-%d", k)
				d := time.Duration(r.IntN(15000)) * time.Microsecond
				ctx, cancel := context.WithTimeout(context.Background(), d)
				start := time.Now()
				var err error
				var unlock func() error
				if r.IntN(2) == 0 {
					_, unlock, err = c.TryLock(ctx, key)
				} else {
					_, unlock, err = c.Lock(ctx, key)
				}
				if took := time.Since(start); took > d+locktest.Bound(100*time.Millisecond) {
					t.Errorf("call took %v with a %v deadline", took, d)
				}
				cancel()
				if err != nil {
					continue
				}
				if n := inside[k].Add(1); n != 1 {
					t.Errorf("%d holders of %s", n, key)
				}
				got.Add(1)
				time.Sleep(100 * time.Microsecond)
				inside[k].Add(-1)
				_ = unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acquisitions", got.Load())
	done := time.Now()
	other := locktest.NewClient(t, srv.Client(t))
	for k := range nkeys {
		key := fmt.Sprintf("cancel-%d", k)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, unlock, err := other.Lock(ctx, key)
		cancel()
		if err != nil {
			t.Fatalf("Lock %s afterwards: %v", key, err)
		}
		t.Logf("%s obtained %v after the calls ended", key, time.Since(done))
		if d := time.Since(done); d > time.Second+locktest.Bound(500*time.Millisecond) {
			t.Errorf("%s blocked %v after the calls ended", key, d)
		}
		_ = unlock()
	}
}

// farRedis is a go-redis hook that holds the reply to each script call
// back for d after Redis ran it, as a distant Redis would: a command once
// sent runs, whatever its caller's context does meanwhile. Other commands
// (a new connection's handshake) pass. It counts the replies of
// acquire.lua that gave the key (a command of 4 keys and 6 arguments
// answered {1, token}).
type farRedis struct {
	d      time.Duration
	grants atomic.Int32
}

func (f *farRedis) replied(cmds []redis.Cmder) {
	scripts := false
	for _, cmd := range cmds {
		name := cmd.Name()
		if name != "evalsha" && name != "eval" {
			continue
		}
		scripts = true
		c, ok := cmd.(*redis.Cmd)
		if !ok || len(c.Args()) != 13 {
			continue
		}
		if v, err := c.Int64Slice(); err == nil && len(v) > 0 && v[0] == 1 {
			f.grants.Add(1)
		}
	}
	if scripts {
		time.Sleep(f.d)
	}
}

func (f *farRedis) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *farRedis) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		f.replied([]redis.Cmder{cmd})
		return err
	}
}

func (f *farRedis) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		f.replied(cmds)
		return err
	}
}

// A burst of TryLock calls cut off by their deadlines on a Redis whose
// replies take 10 ms longer than those: their commands take the keys, and
// each call leaves the janitor a key to release. Every key is obtainable
// by another Client within a claim window of the calls' end, however many
// calls were cut off.
func TestBurstOfCutOffCallsBlocksKeysAtMostAClaimWindow(t *testing.T) {
	locktest.Timed(t)
	srv, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	warm(t, c)
	deadline := locktest.Bound(25 * time.Millisecond) // time for the calls to be sent on a busy machine
	far := &farRedis{d: deadline + 10*time.Millisecond}
	rdb.AddHook(far)
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			// A call succeeds only when its context's timer fired late
			// on a busy machine.
			if _, unlock, err := c.TryLock(ctx, fmt.Sprintf("burst-%d", i)); err == nil {
				_ = unlock()
			}
		}()
	}
	wg.Wait()
	done := time.Now()
	t.Logf("the calls' commands took %d of %d keys", far.grants.Load(), n)
	if far.grants.Load() == 0 {
		t.Fatal("no command took a key: nothing was left to clean up")
	}
	limit := time.Second + locktest.Bound(500*time.Millisecond)
	other := locktest.NewClient(t, srv.Client(t))
	blocked, slowest := lockEvery(t, other, "burst", n, done, done.Add(limit), false)
	t.Logf("keys obtained up to %v after the calls ended; %d not within %v", slowest, blocked, limit)
	if blocked > 0 {
		t.Errorf("%d of %d keys still blocked %v after the calls ended", blocked, n, limit)
	}
}

// lockEvery has c Lock keys prefix-0 to prefix-(n-1) all at once, each
// waiting until by at most, and returns how many it did not get and how
// long after from it got the last one it did. With retry a Lock that
// fails with another error than ErrNotObtained tries again: on a busy
// machine the nodes of a quorum Client do not always answer n calls at
// once within its node timeout, and then Lock returns the error (see
// NewQuorum), which tells nothing of the key.
func lockEvery(t *testing.T, c *lock.Client, prefix string, n int, from, by time.Time, retry bool) (blocked int, slowest time.Duration) {
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var retried atomic.Int32
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s-%d", prefix, i)
			_, unlock, err := c.Lock(ctx, key)
			for retry && err != nil && !errors.Is(err, lock.ErrNotObtained) && ctx.Err() == nil {
				if retried.Add(1) == 1 {
					t.Logf("%s: %v (tried again)", key, err)
				}
				time.Sleep(10 * time.Millisecond)
				_, unlock, err = c.Lock(ctx, key)
			}
			took := time.Since(from)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				blocked++
				return
			}
			slowest = max(slowest, took)
			_ = unlock()
		}()
	}
	wg.Wait()
	if r := retried.Load(); r > 0 {
		t.Logf("%d Locks tried again after an error", r)
	}
	return blocked, slowest
}
