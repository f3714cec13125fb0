package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

const (
	colMemAfterLease = "memLease"
	colMemNoTTL      = "noTTL"
	colMemBack       = "memBack"
)

const (
	// memWorkers lock scenario 7's keys in parallel, on one shared client.
	memWorkers = 32
	// memWarmUp is how many keys each worker locks and releases before the
	// start is read, so that the client's connections are open by then.
	memWarmUp = 20
	// memLease is scenario 7's lease.
	memLease = 2 * time.Second
	// memReadAt is when the figures "after one lease" are read, after the
	// last release; memGiveUp, when it stops waiting for used_memory to
	// come back.
	memReadAt = memLease + 1500*time.Millisecond
	memGiveUp = memLease + 3*time.Second
	// memWithinMiB: used_memory is back when within this of the start.
	memWithinMiB = 1
	// memPoll is how often used_memory is read after the last release.
	memPoll = 50 * time.Millisecond
)

// memory is scenario 7: memWorkers goroutines on one client lock and
// release keys distinct keys once each, lease memLease; then Redis's
// memory and keys are followed until they are back where they started, or
// for one lease + 3 s at most.
func memory(keys int) scenario {
	return memoryCase(fmt.Sprintf("7. Memory: %s distinct keys locked and released once each", formatNum(float64(keys), 0)), nil, keys)
}

// memoryCase is scenario 7's run for libs (the libraries when nil), under
// a title that starts with what.
func memoryCase(what string, libs []library, keys int) scenario {
	t := newTable(fmt.Sprintf("%s, %d workers on one shared client, lease %v", what, memWorkers, memLease),
		fmt.Sprintf("On a Redis emptied with FLUSHALL, every worker first locks and releases %d keys of its own, so that "+
			"the client's connections are open; the start is read %v later, when Redis has trimmed the idle "+
			"connections' buffers. Memory is INFO memory's used_memory, keys are DBSIZE and keys without TTL are "+
			"DBSIZE less the keys with an expiry (INFO keyspace), each as the change from the start. \"Right after\" "+
			"is read as the last release returns (it includes the buffers of the connections just used, a few hundred "+
			"KiB), \"after %v\" that long later (one lease + %v). Back within %d MiB: the time from the last release "+
			"until used_memory was first within %d MiB of the start, read every %v for up to %v. Locks lost: releases "+
			"that found the lock gone.",
			memWarmUp, memReadAt, memReadAt, memReadAt-memLease, memWithinMiB, memWithinMiB, memPoll, memGiveUp),
		column{colPairsPerSec, "pairs/s", 0},
		column{"memStart", "used_memory at start (MiB)", 2},
		column{"memRight", "right after (MiB)", 2},
		column{"perKey", "per key (B)", 0},
		column{"keysRight", "keys left", 0},
		column{colMemNoTTL, "keys without TTL", 0},
		column{colMemAfterLease, fmt.Sprintf("after %v (MiB)", memReadAt), 2},
		column{"keysLease", fmt.Sprintf("keys left after %v", memReadAt), 0},
		column{colMemBack, fmt.Sprintf("back within %d MiB (s)", memWithinMiB), 2},
		column{colLost, "locks lost", 0},
	)
	t.infinite[colMemBack] = fmt.Sprintf("not within %d MiB", memWithinMiB)
	return scenario{table: t, libs: libs, run: func(ctx context.Context, e *env, lib library) (figures, error) {
		return runMemory(ctx, e, lib, t, keys)
	}}
}

func runMemory(ctx context.Context, e *env, lib library, t *table, keys int) (f figures, err error) {
	s, err := e.open(ctx, lib, memLease, &wireCounter{})
	if err != nil {
		return nil, err
	}
	defer closeAll(&err, s)

	warm := e.key("memory warm-up:")
	err = runWorkers(memWorkers, func(w int) error {
		for i := range memWarmUp {
			release, err := s.lock(ctx, warm+strconv.Itoa(w*memWarmUp+i))
			if err == nil {
				err = release()
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	// Redis trims an idle connection's buffers 2-3 s after its last
	// command: read the start as long after the warm-up as the figures
	// "after one lease" are read after the run, so that both see them
	// trimmed.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(memReadAt):
	}
	start, err := readMemory(ctx, e.admin)
	if err != nil {
		return nil, err
	}

	prefix := e.key("memory:")
	var next atomic.Int64
	var failed atomic.Bool // the others stop at their next key
	var lost losses
	began := time.Now()
	err = runWorkers(memWorkers, func(int) error {
		for i := next.Add(1) - 1; i < int64(keys) && !failed.Load(); i = next.Add(1) - 1 {
			release, err := s.lock(ctx, prefix+strconv.FormatInt(i, 10))
			if err == nil {
				err = lost.check(release())
			}
			if err != nil {
				failed.Store(true)
				return err
			}
		}
		return nil
	})
	released := time.Now()
	if err != nil {
		return nil, err
	}

	r := newReclaim(start, memReadAt, memGiveUp)
	for {
		m, err := readMemory(ctx, e.admin)
		if err != nil {
			return nil, err
		}
		elapsed := time.Since(released)
		if !r.see(elapsed, m) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(r.wait(elapsed)):
		}
	}
	t.detail[lib.name] = lost.note()
	f = r.figures(keys)
	f[colPairsPerSec] = float64(keys) / released.Sub(began).Seconds()
	f[colLost] = lost.count()
	return f, nil
}

// reclaim follows used_memory and the keys after the last release, from
// samples read elapsed after it.
type reclaim struct {
	start  memSample
	readAt time.Duration // when the figures "after one lease" are read
	giveUp time.Duration // when it stops waiting for used_memory to come back

	right   memSample // the first sample, as the last release returned
	atLease memSample // the first sample at or after readAt
	seen    bool
	leaseIn bool          // atLease was read
	back    time.Duration // when used_memory was first back within memWithinMiB; -1: not yet
}

func newReclaim(start memSample, readAt, giveUp time.Duration) *reclaim {
	return &reclaim{start: start, readAt: readAt, giveUp: giveUp, back: -1}
}

// see records m, read elapsed after the last release, and reports whether
// to read again: until the figures after one lease are read and used_memory
// has come back, or giveUp has passed.
func (r *reclaim) see(elapsed time.Duration, m memSample) bool {
	if !r.seen {
		r.right, r.seen = m, true
	}
	if r.back < 0 && math.Abs(mib(m.used-r.start.used)) <= memWithinMiB {
		r.back = elapsed
	}
	if !r.leaseIn && elapsed >= r.readAt {
		r.atLease, r.leaseIn = m, true
	}
	return elapsed < r.giveUp && !(r.leaseIn && r.back >= 0)
}

// wait is how long to wait after a sample read elapsed after the last
// release: memPoll, or less so as to read at readAt.
func (r *reclaim) wait(elapsed time.Duration) time.Duration {
	if !r.leaseIn && elapsed < r.readAt {
		return min(memPoll, r.readAt-elapsed)
	}
	return memPoll
}

// figures are the table's figures but pairs/s and locks lost; "back
// within" is +Inf when used_memory did not come back.
func (r *reclaim) figures(keys int) figures {
	back := math.Inf(1)
	if r.back >= 0 {
		back = r.back.Seconds()
	}
	return figures{
		"memStart":       mib(r.start.used),
		"memRight":       mib(r.right.used - r.start.used),
		"perKey":         float64(r.right.used-r.start.used) / float64(keys),
		"keysRight":      float64(r.right.keys - r.start.keys),
		colMemNoTTL:      float64(r.right.noTTL() - r.start.noTTL()),
		colMemAfterLease: mib(r.atLease.used - r.start.used),
		"keysLease":      float64(r.atLease.keys - r.start.keys),
		colMemBack:       back,
	}
}

// mib expresses bytes in MiB.
func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
