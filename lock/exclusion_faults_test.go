package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Exclusion under faults: Redis stalling, slow pub/sub, stalls longer
// than the lease; no two holds of a key overlap.

// contend runs workers that lock keys through lockers with short random
// deadlines (Lock, TryLock, re-entry) until stop is closed, logging every
// hold in hl.
func contend(lockers []*lock.Client, keys []string, workers int, hl *holdLog, stop <-chan struct{}, opts ...lock.LockOption) (acquired *atomic.Int64, wg *sync.WaitGroup) {
	acquired = &atomic.Int64{}
	wg = &sync.WaitGroup{}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := lockers[w%len(lockers)]
			who := "worker" + strconv.Itoa(w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[rand.N(len(keys))]
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+rand.N(400))*time.Millisecond)
				var lctx context.Context
				var unlock lock.UnlockFunc
				var err error
				if rand.N(3) == 0 {
					lctx, unlock, err = c.TryLock(ctx, key, opts...)
				} else {
					lctx, unlock, err = c.Lock(ctx, key, opts...)
				}
				if err == nil {
					acquired.Add(1)
					if rand.N(4) == 0 { // re-enter, and unlock the levels in either order
						if ictx, iu, err := c.Lock(lctx, key); err == nil {
							if rand.N(2) == 0 {
								hl.section(ictx, key, who, func() error { _ = iu(); return unlock() })
							} else {
								hl.section(ictx, key, who, func() error { _ = unlock(); return iu() })
							}
							cancel()
							continue
						}
					}
					hl.section(lctx, key, who, unlock)
				} else if !exported(err) && !errors.Is(err, context.DeadlineExceeded) {
					fmt.Printf("unexpected error type: %v\n", err)
				}
				cancel()
				time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
			}
		}()
	}
	return acquired, wg
}

// ownerRegister checks exclusion from inside the process: a holder
// registers when Lock returns and deregisters when its section ends (its
// unlock, or its lock context ending first). A registration while another
// holder's lock context is still live is a violation, and so is a fencing
// token not larger than the one before.
type ownerRegister struct {
	mu         sync.Mutex
	cur        context.Context // live holder's lock context; nil when none
	curWho     string
	lastToken  uint64
	violations []string
	sections   atomic.Int64
}

func (r *ownerRegister) enter(lctx context.Context, key, who string) {
	tok, _ := lock.FencingToken(lctx, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sections.Add(1)
	if r.cur != nil && r.cur.Err() == nil {
		r.violations = append(r.violations, fmt.Sprintf("%s obtained %q at %v while %s's lock context was live",
			who, key, time.Now().Format("15:04:05.000000"), r.curWho))
	}
	if tok <= r.lastToken {
		r.violations = append(r.violations, fmt.Sprintf("%s's token %d after %d", who, tok, r.lastToken))
	}
	r.lastToken = tok
	r.cur, r.curWho = lctx, who
}

func (r *ownerRegister) leave(lctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == lctx {
		r.cur = nil
	}
}

func (r *ownerRegister) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, v := range r.violations {
		if i == 10 {
			t.Errorf("... and %d more", len(r.violations)-10)
			break
		}
		t.Error(v)
	}
}

// exclusionSlowPubSub is TestExclusionSlowPubSubAndStallsLongerThanLease
// with every command reaching Redis up late.
func exclusionSlowPubSub(t *testing.T, up time.Duration) {
	srv, _ := newReal(t)
	p := locktest.StartProxy(t, srv.Addr)
	var clients []*lock.Client
	for range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
		defer rdb.Close()
		c, err := lock.New(rdb, lock.WithDefaultLease(400*time.Millisecond), lock.WithDrift(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	p.SlowPubSub(150*time.Millisecond, 600*time.Millisecond)
	p.SlowClients(up)
	key := "adv-excl-" + randKey()
	reg := &ownerRegister{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 12 {
		c := clients[g%3]
		who := fmt.Sprintf("g%d/c%d", g, g%3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lctx, unlock, err := c.Lock(context.Background(), key, lock.WithMaxWait(time.Duration(200+rand.N(1500))*time.Millisecond))
				if err != nil {
					continue
				}
				reg.enter(lctx, key, who)
				select { // hold across a stall now and then
				case <-lctx.Done():
				case <-time.After(time.Duration(rand.N(300)) * time.Millisecond):
				}
				reg.leave(lctx)
				_ = unlock()
			}
		}()
	}
	start := time.Now()
	for range 5 {
		time.Sleep(time.Duration(300+rand.N(500)) * time.Millisecond)
		srv.Pause()
		time.Sleep(600 * time.Millisecond)
		srv.Resume()
	}
	// Liveness is not this test's concern, but exclusion is checked only
	// over sections that ran: with commands 120 ms late most waiters give
	// up before their turn (their waits are shorter than the queue), and
	// under load the stalls may leave none. The goroutines go on, Redis
	// no longer stalled, until a few sections ran (measured: 1-4 in the
	// stalls, 11 a 7 s run without them), for at most 30 s.
	want := int64(10)
	if up > 0 {
		want = 3
	}
	for time.Since(start) < 30*time.Second && reg.sections.Load() < want {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d sections in %v", reg.sections.Load(), time.Since(start).Round(time.Millisecond))
	reg.check(t)
	// Two sections at least, so that exclusion had a pair to check: in
	// the fresh-clone CI, every package testing at once, a run with
	// commands 120 ms late reached 2 of the 3 it waits for in 31 s.
	if reg.sections.Load() < 2 {
		t.Errorf("only %d sections in %v", reg.sections.Load(), time.Since(start).Round(time.Millisecond))
	}
}

// Mutual exclusion on one Redis that freezes again and again (SIGSTOP for
// 50-700 ms every few hundred ms), with callers cut off by their
// deadlines, the janitor cleaning up after them, leases of 1 s that may
// lapse, and two Clients.
func TestExclusionWhileRedisStutters(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	var lockers []*lock.Client
	for range 2 {
		lockers = append(lockers, locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(time.Second)))
	}
	hl := &holdLog{}
	stop := make(chan struct{})
	acquired, wg := contend(lockers, []string{"a", "b"}, 12, hl, stop)
	deadline := time.Now().Add(3 * time.Second)
	pauses := 0
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(100+rand.N(300)) * time.Millisecond)
		srv.Pause()
		pauses++
		time.Sleep(time.Duration(50+rand.N(650)) * time.Millisecond)
		srv.Resume()
	}
	close(stop)
	wg.Wait()
	t.Logf("%d holds over %d pauses", acquired.Load(), pauses)
	if acquired.Load() < int64(locktest.Least(20)) {
		t.Errorf("only %d holds in 6 s", acquired.Load())
	}
	for _, o := range hl.overlaps() {
		t.Error("two holders at once: " + o)
	}
}

// TestExclusionSlowPubSubAndStallsLongerThanLease (guarantee 1, at most
// one holder; guarantee 2, a lost lease is reported first): 3 Clients
// reach Redis through a proxy whose pub/sub connections deliver 150-600
// ms late (slow-pub/sub mode: first waiters poll), 12 goroutines contend
// for one key with a 400 ms lease, and Redis freezes for 600 ms (longer
// than the lease) again and again. The drift allowance is 100 ms so that
// a timer fired late on a loaded machine is not counted. No holder may
// obtain the key while another's lock context is live; tokens increase.
// Once more with every command held up 120 ms on its way to Redis.
func TestExclusionSlowPubSubAndStallsLongerThanLease(t *testing.T) {
	t.Parallel()
	for _, up := range []time.Duration{0, 120 * time.Millisecond} {
		t.Run(fmt.Sprintf("commands %v late", up), func(t *testing.T) {
			t.Parallel()
			exclusionSlowPubSub(t, up)
		})
	}
}
