package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Validity when Redis stalls: every hold ends by its validity.

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// When Redis stalls (SIGSTOP), renewals fail: every hold, renewed or
// fixed, of leases from 300 ms to 1.2 s taken in random order, ends by
// its validity, none much later and none before its last renewal's
// validity could have ended.
func TestStallEndsEveryHoldByValidity(t *testing.T) {
	t.Parallel() // long and independent: its own server
	srv, rdb := newReal(t)
	rec := newEndRecorder()
	c := locktest.NewClient(t, rdb, lock.WithObserver(rec))
	ctx := context.Background()
	type spec struct {
		lease time.Duration
		fixed bool
	}
	var specs []spec
	for _, d := range []time.Duration{300, 500, 800, 1200} {
		for range 5 {
			specs = append(specs, spec{d * time.Millisecond, false})
		}
		specs = append(specs, spec{d * time.Millisecond, true})
	}
	rand.Shuffle(len(specs), func(i, j int) { specs[i], specs[j] = specs[j], specs[i] })
	type taken struct {
		spec
		key         string
		ctx         context.Context
		unlock      lock.UnlockFunc
		start, done time.Time
	}
	var holds []taken
	for i, s := range specs {
		key := fmt.Sprintf("stall-%d-%v-%v", i, s.lease, s.fixed)
		opt := lock.WithLease(s.lease)
		if s.fixed {
			opt = lock.WithFixedLease(s.lease)
		}
		start := time.Now()
		lctx, unlock := locktest.MustLock(t, c, ctx, key, opt)
		holds = append(holds, taken{s, key, lctx, unlock, start, time.Now()})
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // spread the schedules
	}
	time.Sleep(250 * time.Millisecond) // some renewals confirmed
	paused := time.Now()
	srv.Pause()
	t.Cleanup(srv.Resume)
	var exps []expectation
	for _, h := range holds {
		e := expectation{key: h.key, ctx: h.ctx, unlock: h.unlock}
		v := validityOf(h.lease)
		switch {
		case h.fixed:
			e.earliest, e.last = h.start.Add(v), h.done.Add(v)
		case h.ctx.Err() != nil:
			t.Errorf("%s ended before the stall: %v", h.key, context.Cause(h.ctx))
			continue
		default:
			// The last renewal confirmed was sent before the stall, and at
			// most an interval (a third of the lease) and a round trip
			// before it, unless that was the acquisition itself.
			e.earliest = maxTime(h.start, paused.Add(-h.lease/3-50*time.Millisecond)).Add(v)
			e.last = paused.Add(v)
		}
		exps = append(exps, e)
	}
	checkEnds(t, rec, exps, srv.Resume)
}

// A waiter with a fixed lease shorter than the claim window is handed the
// key and confirms it with an attempt, which sets its lease (150 ms). It
// lets the lease lapse, as a fixed lease may ("the key simply expires"):
// once its context says the lease is gone, the key must be free for
// anyone, not kept for the rest of the claim window as if a queued waiter
// still had its turn.
func TestLapsedFixedLeaseAfterHandOffFreesKey(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	const key = "ho-fixed"
	const lease = 150 * time.Millisecond
	holder := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, rdb)
	other := locktest.NewClient(t, rdb)
	ctx := context.Background()

	_, unlock := locktest.MustLock(t, holder, ctx, key)
	done, res := lockAsync(waiter, ctx, key, lock.WithFixedLease(lease))
	waitQueued(t, rdb, key, 1)
	waitSubscribed(t, rdb, key, 1)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	acquired(t, done, res, "the waiter the key was handed to")
	handedAt := time.Now()
	if cause := locktest.Cause(t, res.ctx, 2*time.Second); !errors.Is(cause, lock.ErrLost) {
		t.Fatalf("fixed lease ended with %v, want ErrLost", cause)
	}
	lapsed := time.Now()
	t.Logf("fixed lease reported lost %v after the hand-off; PTTL now %v", lapsed.Sub(handedAt), rdb.PTTL(ctx, "lockkit:{"+key+"}").Val())
	// Allow the drift allowance and a generous margin: the key's TTL was
	// the 150 ms lease.
	var err error
	for time.Since(lapsed) < 300*time.Millisecond {
		var ounlock lock.UnlockFunc
		if _, ounlock, err = other.TryLock(ctx, key); err == nil {
			t.Logf("key free %v after the lease was reported lost", time.Since(lapsed))
			_ = ounlock()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	var ne *lock.NotObtainedError
	errors.As(err, &ne)
	t.Fatalf("key still not obtainable %v after the handed-over fixed lease (%v) lapsed: %v (Reserved=%v); "+
		"queue %v, waits %v", time.Since(lapsed), lease, err, ne != nil && ne.Reserved,
		rdb.LRange(ctx, "lockkit:{"+key+"}:queue", 0, -1).Val(), rdb.HGetAll(ctx, "lockkit:{"+key+"}:waits").Val())
}
