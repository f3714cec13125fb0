package reliability_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// The holder of TestLossNoticePrecedesTakeover has a 3 s lease: renewals
// every second, so that a reply 700 ms late (noticeLatency) still leaves
// the test 300 ms to cut the holder off before its next renewal.
const (
	noticeLease   = 3 * time.Second
	noticeLatency = 700 * time.Millisecond
	noticeKey     = "notice"
	noticeHash    = "lockkit:{notice}"          // its lock's hash (docs/design.md)
	noticeQueue   = "lockkit:{notice}:queue"    // its wait queue
	noticeChannel = "lockkit:{notice}:released" // and its Clients' channels' prefix
)

// A noticeCase takes the key for e.holder, the fault before the cut
// included, and returns its lock context at the moment to cut it off.
type noticeCase struct {
	name string
	// drift is the holder's drift allowance: the notice must come at
	// least half of it before the key is seen gone.
	drift time.Duration
	hold  func(t *testing.T, e *noticeRun) context.Context
}

// TestLossNoticePrecedesTakeover cuts a holder off from Redis, both ways,
// after what the counting of its validity depends on: one or more
// renewals, an acquisition or a renewal whose reply came 700 ms late, a
// hand-off whose message came 700 ms late. Its context must end with
// lock.ErrLost at least half its drift allowance before the test, looking
// at Redis every millisecond, sees the key gone or given to another
// owner, and before another Client's Lock, waiting meanwhile, returns.
//
// Each case fails on a miscount of the validity (docs/reliability.md,
// "The suite can fail"): counted from the reply rather than the send
// (slow acquisition, slow renewal), a renewal that sets less than the
// lease the holder counts (cut after renewals), a hand-off counted from
// the message's arrival rather than the waiter's last send (slow
// hand-off message). The TestFaults cuts, starting before the first
// renewal with replies on time, meet none of these.
func TestLossNoticePrecedesTakeover(t *testing.T) {
	t.Parallel()
	for _, c := range []noticeCase{
		{name: "cut after two renewals", drift: 600 * time.Millisecond, hold: func(t *testing.T, e *noticeRun) context.Context {
			lctx := e.lock(t)
			e.awaitRenewals(t, 2, 0)
			return lctx
		}},
		{name: "slow acquisition, then cut", drift: 600 * time.Millisecond, hold: func(t *testing.T, e *noticeRun) context.Context {
			e.slow(t)
			start := now()
			lctx := e.lock(t)
			if d := now() - start; d < int64(noticeLatency) {
				t.Fatalf("Lock returned %s after it was called, before the %v latency", ms(d), noticeLatency)
			}
			return lctx
		}},
		{name: "slow renewal, then cut", drift: 600 * time.Millisecond, hold: func(t *testing.T, e *noticeRun) context.Context {
			lctx := e.lock(t)
			e.slow(t)
			e.awaitRenewals(t, 1, noticeLatency)
			return lctx
		}},
		{name: "slow hand-off message, then cut", drift: 400 * time.Millisecond, hold: holdHandedOff},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newNoticeRun(t, c.drift)
			lctx := c.hold(t, e)
			var told atomic.Int64
			context.AfterFunc(lctx, func() { told.Store(now()) })
			if lctx.Err() != nil {
				t.Fatalf("holder lost its lock before the cut: %v", context.Cause(lctx))
			}
			token := holderOf(e.rdb, noticeHash)
			cut := e.cut(t)
			taken := make(chan int64, 1)
			go func() {
				_, unlock, err := e.other.Lock(context.Background(), noticeKey)
				if err != nil {
					t.Errorf("other Client's Lock: %v", err)
					taken <- 0
					return
				}
				taken <- now()
				_ = unlock()
			}()
			gone := e.awaitChange(t, token, 2*noticeLease)
			took := <-taken
			<-lctx.Done()
			if cause := context.Cause(lctx); !errors.Is(cause, lock.ErrLost) {
				t.Fatalf("holder's context ended with %v, want lock.ErrLost", cause)
			}
			// AfterFunc runs when the context is done: told is set by now.
			for told.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			ahead := gone - told.Load()
			t.Logf("holder told %s after the cut, %s before the key was seen gone (drift allowance %v); another Client took it %s after the holder was told",
				ms(told.Load()-cut), ms(ahead), c.drift, ms(took-told.Load()))
			if ahead < int64(c.drift/2) {
				t.Errorf("holder told %s before its key was seen gone, want at least half its %v drift allowance", ms(ahead), c.drift)
			}
			if took != 0 && took-told.Load() < int64(c.drift/2) {
				t.Errorf("another Client took the key %s after the holder was told, want at least half its %v drift allowance", ms(took-told.Load()), c.drift)
			}
		})
	}
}

// noticeRun is one case of TestLossNoticePrecedesTakeover: a holder
// Client reaching Redis through a proxy, another Client reaching it
// directly.
type noticeRun struct {
	p      *toxiproxy.Proxy
	rdb    *redis.Client // direct, to look at the key
	holder *lock.Client  // through p
	sig    signals       // the holder's renewals
	other  *lock.Client
}

func newNoticeRun(t *testing.T, drift time.Duration) *noticeRun {
	srv := redistest.Start(t)
	warmScripts(t, srv.Addr) // a cold script cache is TestSlowRepliesKeepLease's
	e := &noticeRun{p: newProxy(t, "holder", srv.Addr), rdb: srv.Client(t), sig: newSignals()}
	rdb := redis.NewClient(&redis.Options{Addr: e.p.Listen})
	t.Cleanup(func() { _ = rdb.Close() })
	var err error
	e.holder, err = lock.New(rdb, lock.WithDefaultLease(noticeLease), lock.WithDrift(drift), lock.WithObserver(e.sig))
	if err != nil {
		t.Fatal(err)
	}
	// Closed first: a cut-off Client's Close waits for Redis up to its bound.
	t.Cleanup(func() { _ = e.holder.Close() })
	e.other = leaseClient(t, srv.Client(t), noticeLease)
	return e
}

// lock takes the key for the holder; the test ends the hold by the cut.
func (e *noticeRun) lock(t *testing.T) context.Context {
	t.Helper()
	lctx, _, err := e.holder.Lock(context.Background(), noticeKey)
	if err != nil {
		t.Fatal(err)
	}
	return lctx
}

// slow delays every reply to the holder by noticeLatency, pub/sub
// messages included.
func (e *noticeRun) slow(t *testing.T) {
	t.Helper()
	if err := addToxic(e.p, toxic{Name: "slow", Type: "latency", Stream: "downstream", Attributes: map[string]int64{"latency": noticeLatency.Milliseconds()}}); err != nil {
		t.Fatal(err)
	}
}

// cut drops the holder's traffic both ways from now on and returns when.
func (e *noticeRun) cut(t *testing.T) int64 {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		if err := addToxic(e.p, cut(stream)); err != nil {
			t.Fatal(err)
		}
	}
	return now()
}

// awaitRenewals waits for n successful renewals of the holder's lease
// whose replies took at least slow each.
func (e *noticeRun) awaitRenewals(t *testing.T, n int, slow time.Duration) {
	t.Helper()
	limit := time.After(time.Duration(n+2) * noticeLease)
	for n > 0 {
		select {
		case r := <-e.sig.renewed:
			if r.Err == nil && r.Lost == 0 && r.Duration >= slow {
				n--
			}
		case <-limit:
			t.Fatalf("%d renewals taking %v or more still missing", n, slow)
		}
	}
}

// awaitChange looks at the key every millisecond until the holder of
// fencing token token no longer has it, and returns when it saw that.
func (e *noticeRun) awaitChange(t *testing.T, token string, limit time.Duration) int64 {
	t.Helper()
	for end := now() + int64(limit); holderOf(e.rdb, noticeHash) == token; time.Sleep(time.Millisecond) {
		if now() > end {
			t.Fatalf("key still held by the cut-off holder %v after the cut", limit)
		}
	}
	return now()
}

// holdHandedOff has the holder wait, its replies and messages slowed,
// for the key the other Client holds, which that Client then releases:
// the key is handed to the holder, whose message of it comes 700 ms
// late, with less than half the claim window left to count on.
func holdHandedOff(t *testing.T, e *noticeRun) context.Context {
	_, unlock, err := e.other.Lock(context.Background(), noticeKey)
	if err != nil {
		t.Fatal(err)
	}
	e.slow(t)
	type result struct {
		lctx context.Context
		err  error
	}
	got := make(chan result, 1)
	go func() {
		lctx, _, err := e.holder.Lock(context.Background(), noticeKey)
		got <- result{lctx, err}
	}()
	// The holder has joined the key's wait queue in Redis and subscribed
	// to its channel once both show there; its replies, the
	// subscription's confirmation among them, once one more latency has
	// passed. (Its connections' set-up takes round trips too.)
	ctx := context.Background()
	for end := now() + int64(10*time.Second); e.rdb.LLen(ctx, noticeQueue).Val() == 0 || len(e.rdb.PubSubChannels(ctx, noticeChannel+"*").Val()) == 0; time.Sleep(time.Millisecond) {
		if now() > end {
			t.Fatal("the holder neither in the wait queue nor subscribed within 10 s")
		}
	}
	time.Sleep(noticeLatency * 3 / 2)
	released := now()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := now() - released; d < int64(noticeLatency) {
		t.Fatalf("holder obtained the key %s after the release, before the %v latency", ms(d), noticeLatency)
	}
	return r.lctx
}
