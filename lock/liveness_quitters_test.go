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

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Liveness with waiters that give up (cancelled contexts, wait limits,
// Close): none of them keeps the key, and no wake-up is lost for the
// waiters behind.

// acquiredMark is an Observer that notes, under its mutex, that a Lock
// obtained its key and is about to return: a cancellation made under the
// same mutex before the note came strictly before Lock's last look at its
// context.
type acquiredMark struct {
	recorder
	acquired bool
}

func (m *acquiredMark) AcquireEnded(ctx context.Context, a lock.Acquire, held context.Context) context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acquires = append(m.acquires, a)
	m.acquired = m.acquired || a.Outcome == lock.OutcomeAcquired
	return held
}

// cancel calls cancel and reports whether it came before the note.
func (m *acquiredMark) cancel(cancel context.CancelFunc) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cancel()
	return !m.acquired
}

func (m *acquiredMark) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acquired = false
}

// A waiter whose context is cancelled around the moment the key is handed
// to it either obtains the key with a live lock context, or fails and
// passes the key on at once: never a success whose context is already
// done, which the caller would take for a lock it holds while it is about
// to stop, nor a key left blocked for the next waiter. Each round: B
// holds, A and then C wait; A's context is cancelled at a random moment
// from 1 ms before to 2 ms after B's unlock starts. A success whose
// context is done is allowed only when the cancellation came after Lock
// had obtained the key and reported it (the caller's business, as a
// cancellation just after Lock returned would be).
func TestCancelledWaiterNeverSucceedsDone(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	mark := &acquiredMark{}
	a := locktest.NewClient(t, rdb, lock.WithObserver(mark))
	b := locktest.NewClient(t, rdb)
	c := locktest.NewClient(t, rdb)
	rounds := 600
	if testing.Short() {
		rounds = 100
	}
	var doneSuccess, failures int
	for i := range rounds {
		key := "cancel-handoff-" + randKey()
		_, unlockB := locktest.MustLock(t, b, context.Background(), key)
		actx, cancelA := context.WithCancel(context.Background())
		mark.reset()
		var cancelledFirst atomic.Bool // A was cancelled before Lock obtained the key
		aDone := make(chan struct{})
		var aRes lockResult
		var doneAtReturn bool
		go func() {
			defer close(aDone)
			aRes.ctx, aRes.unlock, aRes.err = a.Lock(actx, key)
			doneAtReturn = aRes.err == nil && aRes.ctx.Err() != nil // at once: a later cancel is the caller's business
		}()
		waitQueued(t, rdb, key, 1)
		cDone, cRes := lockAsync(c, context.Background(), key)
		waitQueued(t, rdb, key, 2)
		waitSubscribed(t, rdb, key, 2)

		offset := time.Duration(rand.IntN(3000)-1000) * time.Microsecond
		if offset < 0 {
			cancelledFirst.Store(mark.cancel(cancelA))
			time.Sleep(-offset)
		} else {
			go func() {
				time.Sleep(offset)
				cancelledFirst.Store(mark.cancel(cancelA))
			}()
		}
		if err := unlockB(); err != nil {
			t.Fatalf("round %d: B's unlock: %v", i, err)
		}
		locktest.Within(t, aDone, 2*time.Second, "A's Lock")
		switch {
		case aRes.err == nil:
			if doneAtReturn && cancelledFirst.Load() {
				doneSuccess++
			}
			_ = aRes.unlock()
		case !errors.Is(aRes.err, lock.ErrNotObtained) || !errors.Is(aRes.err, context.Canceled):
			t.Fatalf("round %d: A's Lock = %v, want ErrNotObtained and context.Canceled", i, aRes.err)
		default:
			failures++
		}
		// Whatever A got, C, next in line, gets the key at once.
		locktest.Within(t, cDone, 500*time.Millisecond, "C's Lock after A's turn")
		if cRes.err != nil {
			t.Fatalf("round %d: C's Lock = %v", i, cRes.err)
		}
		if err := cRes.unlock(); err != nil {
			t.Fatalf("round %d: C's unlock: %v", i, err)
		}
		cancelA()
	}
	t.Logf("%d rounds: %d failures, %d successes with a context cancelled before it obtained the key", rounds, failures, doneSuccess)
	if doneSuccess > 0 {
		t.Errorf("%d of %d rounds: Lock succeeded with a lock context that was cancelled before it obtained the key", doneSuccess, rounds)
	}
	mark.mu.Lock()
	defer mark.mu.Unlock()
	acquired := 0
	for _, a := range mark.acquires {
		if a.Outcome == lock.OutcomeAcquired {
			acquired++
		}
	}
	if acquired != len(mark.releases) {
		t.Errorf("observer: %d acquisitions, %d releases; want one release for each", acquired, len(mark.releases))
	}
}

// TestNoWakeUpLostWithCancelsAndClose ("no wake-up is ever lost",
// exclusion, Close takes its waiters out of the queue): 20 goroutines on
// one key across 3 Clients; a third of the calls are cancelled at a random
// moment; half-way the third Client closes while its goroutines wait.
// Every call that is not cancelled must obtain the key within its wait
// limit (3 s, while a turn takes milliseconds): a timeout is a wake-up
// lost or a turn stuck behind a waiter that is gone. No two lock contexts
// are live at once and tokens increase. Afterwards the key is free at once.
func TestNoWakeUpLostWithCancelsAndClose(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	var clients []*lock.Client
	for range 3 {
		c, err := lock.New(rdb, lock.WithDefaultLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	key := "adv-wake-" + randKey()
	reg := &ownerRegister{}
	var timeouts, cancels, closed atomic.Int64
	var firstTimeout atomic.Value
	stop := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	for g := range 20 {
		c := clients[g%3]
		who := fmt.Sprintf("g%d/c%d", g, g%3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				ctx, cancel := context.WithCancel(context.Background())
				cancelled := rand.N(3) == 0
				if cancelled {
					time.AfterFunc(time.Duration(rand.N(30))*time.Millisecond, cancel)
				}
				start := time.Now()
				lctx, unlock, err := c.Lock(ctx, key, lock.WithMaxWait(3*time.Second))
				switch {
				case err == nil:
					reg.enter(lctx, key, who)
					time.Sleep(time.Duration(rand.N(1500)) * time.Microsecond)
					reg.leave(lctx)
					if uerr := unlock(); uerr != nil && !errors.Is(uerr, lock.ErrClosed) {
						t.Errorf("%s: unlock: %v", who, uerr)
					}
				case errors.Is(err, lock.ErrClosed):
					closed.Add(1)
					cancel()
					return
				case errors.Is(err, context.Canceled):
					cancels.Add(1)
				default:
					if timeouts.Add(1) == 1 {
						firstTimeout.Store(fmt.Sprintf("%s: %v after %v", who, err, time.Since(start)))
					}
				}
				cancel()
			}
		}()
	}
	time.Sleep(2 * time.Second)
	if took := timed(func() { _ = clients[2].Close() }); took > locktest.Bound(time.Second) {
		t.Errorf("Close with waiters took %v", took)
	}
	wg.Wait()
	t.Logf("%d sections, %d cancelled calls, %d calls ended by Close, %d timed out", reg.sections.Load(), cancels.Load(), closed.Load(), timeouts.Load())
	reg.check(t)
	if n := timeouts.Load(); n > 0 {
		t.Errorf("%d calls not cancelled did not obtain the key within 3 s; first: %v", n, firstTimeout.Load())
	}
	if reg.sections.Load() < 100 {
		t.Errorf("only %d sections in 4 s", reg.sections.Load())
	}
	// A free key is obtainable at once (within two claim windows at worst).
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, unlock, err := clients[0].Lock(ctx, key)
	if err != nil {
		t.Fatalf("free key not obtainable within two claim windows: %v", err)
	}
	t.Logf("free key obtained in %v", time.Since(start))
	_ = unlock()
}

// Hand-offs between many live waiters of three Clients, while other
// callers keep joining the queue and giving up (150 ms wait limit): each
// release reaches the next live waiter within milliseconds.
func TestHandOffAmongQuittersTakesMilliseconds(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	var cs []*lock.Client
	for range 3 {
		cs = append(cs, locktest.NewClient(t, srv.Client(t)))
	}
	ctx := context.Background()
	const key = "chain"
	var mu sync.Mutex
	var lastRelease time.Time
	var worst time.Duration
	var holds atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[w%3]
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, unlock, err := c.Lock(ctx, key, lock.WithMaxWait(10*time.Second))
				if err != nil {
					t.Errorf("live waiter: %v", err)
					return
				}
				mu.Lock()
				if !lastRelease.IsZero() {
					worst = max(worst, time.Since(lastRelease))
				}
				mu.Unlock()
				holds.Add(1)
				time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
				mu.Lock()
				lastRelease = time.Now()
				mu.Unlock()
				if err := unlock(); err != nil {
					t.Errorf("unlock: %v", err)
					return
				}
			}
		}()
	}
	for q := range 6 { // quitters
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[q%3]
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, unlock, err := c.Lock(ctx, key, lock.WithMaxWait(time.Duration(5+rand.N(150))*time.Millisecond))
				if err == nil {
					mu.Lock()
					if !lastRelease.IsZero() {
						worst = max(worst, time.Since(lastRelease))
					}
					lastRelease = time.Now()
					mu.Unlock()
					_ = unlock()
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d hand-offs between live waiters; largest release→acquire gap %v", holds.Load(), worst)
	if worst > locktest.Bound(250*time.Millisecond) {
		t.Errorf("largest release→acquire gap %v with live waiters queued; want milliseconds", worst)
	}
}

// A waiter gives up (context cancelled) the very moment a release hands it
// the key, give or take a few hundred µs. Either its Lock succeeds (and
// then nobody else gets the key until it unlocks), or it fails and the
// key goes on to the next waiter, queued behind it, within one claim
// window (in practice at once: the waiter leaves the queue and passes the
// key on). Never both, never neither.
func TestWaiterCancelledAtHandOff(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv, rdb := newReal(t)
	hrdb := srv.Client(t)
	hook := &onHandOff{}
	hrdb.AddHook(hook)
	holder := locktest.NewClient(t, hrdb)
	waiter := locktest.NewClient(t, srv.Client(t))
	next := locktest.NewClient(t, srv.Client(t))
	bg := context.Background()
	var worst time.Duration
	wins := 0
	const rounds = 25
	for i := range rounds {
		key := "ho-cancel-" + randKey()
		_, unlock := locktest.MustLock(t, holder, bg, key)
		wctx, cancel := context.WithCancel(bg)
		wdone, wres := lockAsync(waiter, wctx, key)
		waitQueued(t, rdb, key, 1)
		ndone, nres := lockAsync(next, bg, key, lock.WithMaxWait(10*time.Second))
		waitQueued(t, rdb, key, 2)
		delay := time.Duration(rand.N(600)) * time.Microsecond
		hook.set(func(string) {
			if i%2 == 0 {
				time.AfterFunc(delay, cancel)
			} else {
				cancel()
			}
		})
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		hook.set(nil)
		locktest.Within(t, wdone, 2*time.Second, "the cancelled waiter")
		if wres.err == nil {
			// It got the key: the next waiter must not have it too.
			wins++
			if !lock.Held(wres.ctx, key) {
				t.Fatalf("round %d: Lock succeeded but Held is false: %v", i, context.Cause(wres.ctx))
			}
			select {
			case <-ndone:
				t.Fatalf("round %d: both the cancelled waiter and the next one hold %q (next: %v)", i, key, nres.err)
			case <-time.After(50 * time.Millisecond):
			}
			if err := wres.unlock(); err != nil {
				t.Fatalf("round %d: unlock: %v", i, err)
			}
		} else if !errors.Is(wres.err, context.Canceled) {
			t.Fatalf("round %d: cancelled waiter = %v, want context.Canceled", i, wres.err)
		}
		locktest.Within(t, ndone, 3*time.Second, "the next waiter")
		if nres.err != nil {
			t.Fatalf("round %d: next waiter: %v", i, nres.err)
		}
		d := nres.at.Sub(released)
		if wres.err != nil {
			worst = max(worst, d)
			if d > time.Second+locktest.Bound(200*time.Millisecond) {
				t.Errorf("round %d (cancel after %v): next waiter got the key %v after the release; want within one 1 s claim window", i, delay, d)
			}
		}
		_ = nres.unlock()
	}
	t.Logf("%d/%d rounds the cancelled waiter still got the key; otherwise the next one got it at most %v after the release", wins, rounds, worst)
}
