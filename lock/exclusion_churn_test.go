package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Exclusion and fencing under hand-off churn: plain waiters, waiters
// giving up at random, TryLock and re-entries on two keys through three
// Clients.

// fenceScript is a storage that rejects writes whose fencing token is not
// larger than the last one it accepted for the key.
var fenceScript = redis.NewScript(`
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local tok = tonumber(ARGV[1])
if tok <= last then
  return {0, tostring(last)}
end
redis.call('SET', KEYS[1], ARGV[1])
return {1, tostring(last)}
`)

// fencedStore is fenceScript on a Redis of its own.
type fencedStore struct {
	rdb    *redis.Client
	mu     sync.Mutex
	errs   []string
	writes atomic.Int64
}

func (s *fencedStore) failf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) < 20 {
		s.errs = append(s.errs, fmt.Sprintf(format, args...))
	}
}

// section runs one critical section of key under lctx: it checks the
// hold, writes the fencing token to the store, stays for hold, and
// records the interval in hl: from Lock's return to the unlock, or to
// the loss of the lease if the hold was lost first. A write the store
// rejects is a failure unless the hold was lost by then.
func (s *fencedStore) section(lctx context.Context, key, who string, hold time.Duration, hl *holdLog) {
	start := time.Now()
	if !lock.Held(lctx, key) {
		s.failf("%s: Held(%q) false right after Lock returned (cause %v)", who, key, context.Cause(lctx))
		return
	}
	tok, ok := lock.FencingToken(lctx, key)
	if !ok {
		s.failf("%s: no fencing token for %q", who, key)
		return
	}
	var lostAt atomic.Int64
	stop := context.AfterFunc(lctx, func() {
		if errors.Is(context.Cause(lctx), lock.ErrLost) {
			lostAt.Store(time.Now().UnixNano())
		}
	})
	r, err := fenceScript.Run(context.Background(), s.rdb, []string{"fence:" + key}, tok).Slice()
	switch {
	case err != nil:
		s.failf("store: %v", err)
	case r[0] != int64(1) && lock.Held(lctx, key):
		s.failf("%s: token %d for %q rejected by the store (last accepted %v) while the hold is live", who, tok, key, r[1])
	case r[0] == int64(1):
		s.writes.Add(1)
	}
	time.Sleep(hold)
	end := time.Now()
	stop()
	if ns := lostAt.Load(); ns != 0 && time.Unix(0, ns).Before(end) {
		end = time.Unix(0, ns)
	}
	hl.mu.Lock()
	hl.all = append(hl.all, interval{key, start, end, who})
	hl.mu.Unlock()
}

func newFencedStore(rdb *redis.Client) *fencedStore {
	return &fencedStore{rdb: rdb}
}

func churn(t *testing.T, lease time.Duration) {
	srv, rdb := newReal(t)
	store := newFencedStore(newStoreRedis(t))
	hl := &holdLog{}
	var cs []*lock.Client
	for range 3 {
		cs = append(cs, locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(lease)))
	}
	short := lease < time.Second
	keys := []string{"churn-a", "churn-b"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var holds, gaveUp, busy, lost atomic.Int64
	unexpected := func(who string, err error) bool {
		if short && errors.Is(err, lock.ErrLost) {
			lost.Add(1)
			return false
		}
		store.failf("%s: unexpected error %v", who, err)
		return true
	}
	for w := range 18 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[w%len(cs)]
			who := fmt.Sprintf("worker%d", w)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[rand.N(len(keys))]
				ctx, cancel := context.WithCancel(context.Background())
				var lctx context.Context
				var unlock lock.UnlockFunc
				var err error
				giveUp := (*time.Timer)(nil)
				switch kind := (w + i) % 4; kind {
				case 0: // waits as long as it takes
					lctx, unlock, err = c.Lock(ctx, key, lock.WithMaxWait(20*time.Second))
				case 1: // gives up at a random moment: its context is cancelled
					giveUp = time.AfterFunc(time.Duration(rand.N(8000))*time.Microsecond, cancel)
					lctx, unlock, err = c.Lock(ctx, key)
				case 2: // a wait limit of a few ms
					lctx, unlock, err = c.Lock(ctx, key, lock.WithMaxWait(time.Duration(1+rand.N(8))*time.Millisecond))
				case 3:
					lctx, unlock, err = c.TryLock(ctx, key)
				}
				if err != nil {
					cancel()
					switch {
					case errors.Is(err, lock.ErrNotObtained):
						if errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "wait limit") || errors.Is(err, context.DeadlineExceeded) {
							gaveUp.Add(1)
						} else {
							busy.Add(1)
						}
					default:
						if unexpected(who, err) {
							return
						}
					}
					continue
				}
				holds.Add(1)
				if giveUp != nil && !giveUp.Stop() {
					// Cancelled just as it got the key: the hold lives on
					// (Held), only its context is done.
					store.section(lctx, key, who, 0, hl)
					if err := unlock(); err != nil {
						unexpected(who+" unlock", err)
					}
					cancel()
					continue
				}
				hold := time.Duration(rand.N(1500)) * time.Microsecond
				if short && rand.N(20) == 0 {
					hold = locktest.Bound(time.Duration(100+rand.N(300)) * time.Millisecond)
				}
				if rand.N(3) == 0 {
					ictx, iunlock, err := c.Lock(lctx, key)
					if err != nil {
						_ = unlock()
						cancel()
						if unexpected(who+" re-entry", err) {
							return
						}
						continue
					}
					store.section(ictx, key, who, hold, hl)
					var e1, e2 error
					if rand.N(2) == 0 {
						e1, e2 = iunlock(), unlock()
					} else {
						e1 = unlock()
						e2 = iunlock()
						if errors.Is(e2, lock.ErrNotHeld) {
							e2 = nil // ended with the outer level
						}
					}
					if err := errors.Join(e1, e2); err != nil {
						unexpected(who+" unlock", err)
					}
				} else {
					store.section(lctx, key, who, hold, hl)
					if err := unlock(); err != nil {
						unexpected(who+" unlock", err)
					}
				}
				cancel()
			}
		}()
	}
	time.Sleep(4 * time.Second)
	close(stop)
	if !locktest.ClosedWithin(locktest.Waited(&wg), 25*time.Second) {
		t.Fatal("workers did not finish within 25 s of the stop")
	}
	t.Logf("lease %v: %d holds, %d fenced writes, %d waits given up, %d busy, %d lost", lease, holds.Load(), store.writes.Load(), gaveUp.Load(), busy.Load(), lost.Load())
	for _, e := range store.errs {
		t.Error(e)
	}
	for _, o := range hl.overlaps() {
		t.Error("two holders at once: " + o)
	}
	if holds.Load() < int64(locktest.Least(200)) {
		t.Errorf("only %d holds in 4 s", holds.Load())
	}
	// Nothing is left blocking a key: each is free at once, or within one
	// claim window of a give-up the janitor is still cleaning after.
	for _, key := range keys {
		if d := obtainableAfter(cs[0], key, 3*time.Second); d < 0 || d > 1200*time.Millisecond {
			t.Errorf("%q obtainable only after %v (-1: not within 3 s) once the churn stopped", key, d)
		}
	}
	requireTTLs(t, rdb)
}

// newStoreRedis starts a second redis-server for the fenced store.
func newStoreRedis(t *testing.T) *redis.Client {
	_, rdb := newReal(t)
	return rdb
}

// Mutual exclusion and fencing under heavy hand-off churn, without
// faults: on two keys, through three Clients, plain waiters, waiters that
// give up at random moments (context cancelled, wait limit of a few ms),
// TryLock callers and re-entries (inner level unlocked first or last) run
// together for 4 s. No two holds of a key may overlap (a hold ends at its
// unlock or when it is reported lost), and every write to the fenced store
// by a live hold must carry a token larger than any before. Afterwards
// each key is obtainable within a claim window and every key Redis still
// has carries a TTL.
//
// With 30 s leases nothing is ever lost. With 150 ms leases the watchdog
// renews throughout (handed-over holds at a third of their TTL), and a
// twentieth of the holds last 100-400 ms, past several renewals. Without
// LOCKKIT_TIMING=1 the short lease and those holds are scaled by
// locktest.Bound (600 ms, still below the claim window), as a starved
// process learns of a loss late, and an overlap must not come from that.
func TestHandOffChurnExclusionAndFencing(t *testing.T) {
	locktest.Timed(t)
	for _, lease := range []time.Duration{lock.DefaultLease, 150 * time.Millisecond} {
		t.Run(lease.String(), func(t *testing.T) {
			t.Parallel()
			if lease < time.Second {
				lease = locktest.Bound(lease)
			}
			churn(t, lease)
		})
	}
}
