package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Validity: a hold ends at its validity (lease minus drift) unless a
// renewal confirmed in time extends it; leases of every length end on time.

// lateBound is how long after its validity a hold may still be live: the
// watchdog's timer, the task that ends the hold and the race detector on
// a shared machine, measured at a few ms; generous.
const lateBound = 150 * time.Millisecond

// validityOf is the validity a lease of d gives from the moment its
// command was sent: d less the default drift allowance (1% + 2 ms).
func validityOf(d time.Duration) time.Duration { return d - d/100 - 2*time.Millisecond }

// expectation is a hold and the window in which it must end by validity.
type expectation struct {
	key            string
	ctx            context.Context
	unlock         lock.UnlockFunc
	earliest, last time.Time // zero earliest: no lower bound
}

// checkEnds waits for every expectation's hold to end and checks it ended
// by validity, with ErrLost (LossNotRenewed), inside its window. Then it
// resumes Redis with resume, if not nil (an unlock of a lost hold still
// tries to release the key, up to a second), and checks each unlock
// returns ErrLost.
func checkEnds(t *testing.T, rec *endRecorder, exps []expectation, resume func()) {
	t.Helper()
	for _, e := range exps {
		for !time.Now().After(e.last.Add(lateBound)) {
			if _, ok := rec.end(e.key); ok {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		got, ok := rec.end(e.key)
		switch {
		case !ok:
			t.Errorf("%s: still live %v after its validity ended (Held %v)", e.key, time.Since(e.last), lock.Held(e.ctx, e.key))
			continue
		case got.rel.Cause != lock.ErrLost || got.rel.Loss != lock.LossNotRenewed:
			t.Errorf("%s: ended with %v (%v), want ErrLost (not_renewed)", e.key, got.rel.Cause, got.rel.Loss)
		case got.at.After(e.last.Add(lateBound)):
			t.Errorf("%s: ended %v after its validity", e.key, got.at.Sub(e.last))
		case !e.earliest.IsZero() && got.at.Before(e.earliest):
			t.Errorf("%s: ended %v before its validity could have", e.key, e.earliest.Sub(got.at))
		}
		if lock.Held(e.ctx, e.key) {
			t.Errorf("%s: Held after it ended", e.key)
		}
		t.Logf("%s: ended %v after its latest possible validity", e.key, got.at.Sub(e.last))
	}
	if resume != nil {
		resume()
	}
	for _, e := range exps {
		if err := e.unlock(); !errors.Is(err, lock.ErrLost) {
			t.Errorf("%s: unlock = %v, want ErrLost", e.key, err)
		}
	}
}

// holdBackRenewals is a go-redis hook that holds every renewal pipeline of
// one lock hash until a set moment, then lets it through.
type holdBackRenewals struct {
	key   string
	mu    sync.Mutex
	until time.Time
}

func (h *holdBackRenewals) set(until time.Time) {
	h.mu.Lock()
	h.until = until
	h.mu.Unlock()
}

func (h *holdBackRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdBackRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *holdBackRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if args := cmd.Args(); len(args) > 3 && args[3] == h.key {
				h.mu.Lock()
				until := h.until
				h.mu.Unlock()
				time.Sleep(time.Until(until))
				break
			}
		}
		return next(ctx, cmds)
	}
}

// Holds of many leases, taken short after long and long after short,
// fixed ones, renewed ones whose caller's context ends (renewals stop) and
// one handed off (its first validity is the claim window, 1 s, though its
// lease is 3 s) each end within a bound of their own validity, while the
// long ones go on.
func TestMixedHoldsEndAtTheirValidity(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	rec := newEndRecorder()
	c := locktest.NewClient(t, rdb, lock.WithDefaultLease(30*time.Second), lock.WithObserver(rec))
	ctx := context.Background()
	var exps []expectation
	fixed := func(key string, d time.Duration) {
		start := time.Now()
		lctx, unlock := locktest.MustLock(t, c, ctx, key, lock.WithFixedLease(d))
		exps = append(exps, expectation{key: key, ctx: lctx, unlock: unlock,
			earliest: start.Add(validityOf(d)), last: time.Now().Add(validityOf(d))})
	}
	renewedUntilCancel := func(key string, d time.Duration) {
		pctx, cancel := context.WithCancel(ctx)
		lctx, unlock := locktest.MustLock(t, c, pctx, key, lock.WithLease(d))
		cancel() // renewals stop; the last one was sent before now
		exps = append(exps, expectation{key: key, ctx: lctx, unlock: unlock, last: time.Now().Add(validityOf(d))})
	}
	long1, unlock1 := locktest.MustLock(t, c, ctx, "long1")
	fixed("fixed-600", 600*time.Millisecond)
	fixed("fixed-150", 150*time.Millisecond)
	renewedUntilCancel("renewed-250", 250*time.Millisecond)
	long2, unlock2 := locktest.MustLock(t, c, ctx, "long2", lock.WithLease(2*time.Second))
	fixed("fixed-400", 400*time.Millisecond)
	fixed("fixed-100", 100*time.Millisecond)
	renewedUntilCancel("renewed-700", 700*time.Millisecond)

	// The hand-off: another Client holds the key, ours waits with a 3 s
	// lease and gets it from the release script.
	other := locktest.NewClient(t, srv.Client(t))
	_, unlockOther := locktest.MustLock(t, other, ctx, "handed")
	pctx, cancel := context.WithCancel(ctx)
	done, res := lockAsync(c, pctx, "handed", lock.WithLease(3*time.Second))
	time.Sleep(50 * time.Millisecond) // queued behind other's hold (a wait, not a timing assertion)
	if err := unlockOther(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, done, 2*time.Second, "hand-off")
	if res.err != nil {
		t.Fatal(res.err)
	}
	cancel()
	exps = append(exps, expectation{key: "handed", ctx: res.ctx, unlock: res.unlock, last: res.at.Add(validityOf(time.Second))})

	checkEnds(t, rec, exps, nil)
	for _, l := range []struct {
		ctx    context.Context
		key    string
		unlock lock.UnlockFunc
	}{{long1, "long1", unlock1}, {long2, "long2", unlock2}} {
		if l.ctx.Err() != nil || !lock.Held(l.ctx, l.key) {
			t.Errorf("%s ended among the short ones: %v", l.key, context.Cause(l.ctx))
		}
		if err := l.unlock(); err != nil {
			t.Errorf("unlock %s: %v", l.key, err)
		}
	}
}

// A renewal confirmed just before the validity ends keeps the hold, even
// though the watchdog's timer is set for that validity: the renewal sent
// a third of a 300 ms lease after the acquisition is held back until
// 1 to 32 ms before the earliest moment its validity could end. A run counts
// when the watchdog reported the confirmed renewal before that moment (so
// it extended the validity first); the hold must then go on.
func TestRenewalJustBeforeValidityKeepsHold(t *testing.T) {
	t.Parallel()
	srv, _ := newReal(t)
	const lease = 300 * time.Millisecond
	conclusive := 0
	for i := range 16 {
		key := fmt.Sprintf("edge-%d", i)
		rdb := srv.Client(t)
		hook := &holdBackRenewals{key: "lockkit:{" + key + "}"}
		rdb.AddHook(hook)
		rec := newEndRecorder()
		c := locktest.NewClient(t, rdb, lock.WithObserver(rec))
		margin := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond,
			12 * time.Millisecond, 16 * time.Millisecond, 24 * time.Millisecond, 32 * time.Millisecond}[i%8]
		start := time.Now()
		validFrom := start.Add(validityOf(lease)) // the validity ends no sooner
		hook.set(validFrom.Add(-margin))
		lctx, unlock := locktest.MustLock(t, c, context.Background(), key, lock.WithLease(lease))
		time.Sleep(time.Until(validFrom.Add(lease))) // the old validity, then a further lease
		confirmed, ok := rec.firstConfirmed(start)
		e, ended := rec.end(key)
		switch {
		case !ok:
			t.Logf("margin %v: no renewal confirmed", margin)
		case !confirmed.Before(validFrom):
			t.Logf("margin %v: renewal reported %v after the validity could end: inconclusive (ended: %v)", margin, confirmed.Sub(validFrom), ended)
		default:
			conclusive++
			// The hold must live until the test looks, a lease after the old
			// validity; a sleep that overran on a busy machine may see a
			// later renewal's loss, which is not this test's concern.
			if ended && e.at.Before(validFrom.Add(lease)) {
				t.Errorf("margin %v: renewal confirmed %v before the validity, yet the hold ended %v after it with %v (%v)",
					margin, validFrom.Sub(confirmed), e.at.Sub(validFrom), e.rel.Cause, e.rel.Loss)
			} else if !ended && !lock.Held(lctx, key) {
				t.Errorf("margin %v: not Held after a renewal confirmed in time", margin)
			}
		}
		if ended {
			_ = unlock()
		} else if err := unlock(); err != nil {
			t.Errorf("unlock: %v", err)
		}
		_ = c.Close()
	}
	if conclusive < 4 {
		t.Fatalf("only %d of 16 runs confirmed the renewal before the validity: the test measured nothing", conclusive)
	}
	t.Logf("%d of 16 runs confirmed the renewal in the last few ms of the validity", conclusive)
}

// A 1 s lease on a Redis that answers in 120 ms is renewed: a renewal
// takes an eighth of the lease, and three are tried before the validity
// ends. It must stay so when the same Client also keeps taking holds of a
// 150 ms lease, which that latency does not let live (each is lost at its
// validity and taken again): their renewals must not take the long
// lease's renewals down with them.
func TestShortLeasesDoNotStarveLongLease(t *testing.T) {
	t.Parallel()
	srv, _ := newReal(t)
	rdb := srv.Client(t)
	rdb.AddHook(latency{120 * time.Millisecond})
	rec := newEndRecorder()
	c := locktest.NewClient(t, rdb, lock.WithObserver(rec))
	ctx := context.Background()
	const lease = time.Second
	watch := func(what string) {
		t.Helper()
		key := "long-" + what
		lctx, unlock := locktest.MustLock(t, c, ctx, key, lock.WithLease(lease))
		select {
		case <-lctx.Done():
			e, _ := rec.end(key)
			t.Errorf("%s: a %v lease on a Redis answering in 120 ms was lost: %v (%v)", what, lease, context.Cause(lctx), e.rel.Loss)
		case <-time.After(3 * lease):
		}
		_ = unlock()
	}
	watch("alone") // the control: the latency alone does not lose it

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lctx, unlock, err := c.Lock(ctx, fmt.Sprintf("short-%d", i), lock.WithLease(150*time.Millisecond))
				if err != nil {
					continue
				}
				select {
				case <-lctx.Done():
				case <-stop:
				}
				_ = unlock()
			}
		}()
		time.Sleep(40 * time.Millisecond) // their schedules apart
	}
	watch("among-short")
	close(stop)
	wg.Wait()
}

// A re-entered hold ends at its validity with every level: the re-entry
// neither registers a second schedule nor moves the validity.
func TestReentrantHoldEndsAtValidity(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	rec := newEndRecorder()
	c := locktest.NewClient(t, rdb, lock.WithObserver(rec))
	const lease = 250 * time.Millisecond
	start := time.Now()
	outer, unlockOuter := locktest.MustLock(t, c, context.Background(), "re", lock.WithFixedLease(lease))
	last := time.Now().Add(validityOf(lease))
	inner, unlockInner := locktest.MustLock(t, c, outer, "re")
	locktest.Within(t, inner.Done(), lease+lateBound, "end of the re-entered level")
	e, ok := rec.end("re")
	switch {
	case !ok:
		t.Fatal("no end reported for the outermost level")
	case e.at.Before(start.Add(validityOf(lease))) || e.at.After(last.Add(lateBound)):
		t.Errorf("ended %v after the validity", e.at.Sub(last))
	}
	for _, ctx := range []context.Context{outer, inner} {
		if cause := context.Cause(ctx); cause != lock.ErrLost || lock.Held(ctx, "re") {
			t.Errorf("level ended with %v, Held %v; want ErrLost, false", cause, lock.Held(ctx, "re"))
		}
	}
	if err := unlockInner(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("inner unlock = %v, want ErrLost", err)
	}
	if err := unlockOuter(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("outer unlock = %v, want ErrLost", err)
	}
}
