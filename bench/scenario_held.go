package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

const (
	colRenewRTPer100 = "rt/100"
	colGoroutines    = "goroutines"
	colLost          = "lost"
)

// heldPeriods is how many renewal periods scenario 5 watches.
const heldPeriods = 3

// heldWorkers take and release scenario 5's locks in parallel.
const heldWorkers = 16

// manyHeld is scenario 5: one client holds locks keys at once, each with
// lease, renewed every third of it, for heldPeriods renewal periods.
func manyHeld(locks int, lease time.Duration) scenario {
	t := newTable(fmt.Sprintf("5. Many held locks: %s locks held at once by one client, lease %v (renewal every %v), for %d renewal periods",
		formatNum(float64(locks), 0), lease, lease/3, heldPeriods),
		"lockkit renews with its watchdog; redsync and redislock have none, so each lock gets the loop their users "+
			"write: a goroutine per lock extending it every third of the lease. The floor has no renewal. "+
			"Goroutines added: the process's growth from before the first lock to all held. Heap and stacks per lock: "+
			"the growth (after a GC) from half the locks held to all held, divided by the second half. "+
			"Locks lost: releases at the end that found the lock gone, its lease having lapsed while held.",
		column{"rt", "renewal round trips/period", 1},
		column{colRenewRTPer100, "per 100 locks", 2},
		column{"cmds", "commands/period", 0},
		column{"redis", "Redis commands/period", 0},
		column{colGoroutines, "goroutines added", 0},
		column{"heap", "heap/lock (B)", 0},
		column{"stack", "stacks/lock (B)", 0},
		column{colLost, "locks lost", 0},
	)
	return scenario{table: t, run: func(ctx context.Context, e *env, lib library) (figures, error) {
		return runManyHeld(ctx, e, lib, t, locks, lease)
	}}
}

func runManyHeld(ctx context.Context, e *env, lib library, t *table, locks int, lease time.Duration) (f figures, err error) {
	wc := &wireCounter{}
	s, err := e.open(ctx, lib, lease, wc)
	if err != nil {
		return nil, err
	}
	defer closeAll(&err, s)
	r, ok := s.locker.(renewer)
	if !ok {
		return nil, errNotApplicable
	}
	names := make([]string, locks)
	for i := range names {
		names[i] = e.key("held:" + strconv.Itoa(i))
	}
	releases := make([]func() error, locks)
	take := func(lo, hi int) error {
		return parallel(hi-lo, func(i int) error {
			release, err := r.lockRenewed(ctx, names[lo+i])
			releases[lo+i] = release
			return err
		})
	}
	var lost losses
	releaseAll := func() error {
		return parallel(locks, func(i int) error {
			if releases[i] == nil {
				return nil
			}
			return lost.check(releases[i]())
		})
	}

	// Heap and stacks per lock are measured over the second half, so that
	// what the first lock costs once (connections, maps) is left out.
	g0 := runtime.NumGoroutine()
	half := locks / 2
	var mem0, mem1 runtime.MemStats
	err = take(0, half)
	runtime.GC()
	runtime.ReadMemStats(&mem0)
	if err == nil {
		err = take(half, locks)
	}
	runtime.GC()
	runtime.ReadMemStats(&mem1)
	g1 := runtime.NumGoroutine()
	if err != nil {
		return nil, errors.Join(err, releaseAll())
	}

	before, err := readStats(ctx, e.admin)
	if err != nil {
		return nil, errors.Join(err, releaseAll())
	}
	wire0 := wc.snapshot()
	select {
	case <-time.After(heldPeriods * lease / 3):
	case <-ctx.Done():
	}
	wire := wc.snapshot().sub(wire0)
	after, err := readStats(ctx, e.admin)
	if err = errors.Join(err, ctx.Err(), releaseAll()); err != nil {
		return nil, err
	}
	t.detail[lib.name] = lost.note()
	rt := float64(wire.roundTrips) / heldPeriods
	n := float64(locks)
	return figures{
		"rt":             rt,
		colRenewRTPer100: rt / (n / 100),
		"cmds":           float64(wire.commands()) / heldPeriods,
		"redis":          float64(after.since(before).commands()) / heldPeriods,
		colGoroutines:    float64(g1 - g0),
		"heap":           (float64(mem1.HeapAlloc) - float64(mem0.HeapAlloc)) / float64(locks-half),
		"stack":          (float64(mem1.StackInuse) - float64(mem0.StackInuse)) / float64(locks-half),
		colLost:          lost.count(),
	}, nil
}

// parallel runs do(0) … do(n-1) on heldWorkers goroutines and returns the
// first error, with how many more there were.
func parallel(n int, do func(i int) error) error {
	var next, failed atomic.Int64
	var first atomic.Pointer[error]
	_ = runWorkers(heldWorkers, func(int) error {
		for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
			if err := do(i); err != nil && failed.Add(1) == 1 {
				first.Store(&err)
			}
		}
		return nil
	})
	switch f := failed.Load(); f {
	case 0:
		return nil
	case 1:
		return *first.Load()
	default:
		return fmt.Errorf("%w (and %d more failures)", *first.Load(), f-1)
	}
}
