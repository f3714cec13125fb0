package main

import (
	"context"
	"runtime"
	"time"
)

const (
	colPairsPerSec   = "pairs/s"
	colRoundTrips    = "round trips/pair"
	colCommands      = "commands/pair"
	colRedisCommands = "redis commands/pair"
)

// uncontended is scenario 1: one worker takes and releases one key over
// and over, nobody else around.
func uncontended(cfg config) scenario {
	t := newTable("1. Uncontended: one worker, sequential lock + unlock",
		"Round trips and commands are counted on the client's socket; Redis commands come from INFO commandstats "+
			"and include those run inside scripts (the list below each table, from the last round). "+
			"Allocations are the whole process's, per pair.",
		column{colPairsPerSec, "pairs/s", 0},
		column{"lock50", "lock p50 (µs)", 0},
		column{"lock99", "lock p99 (µs)", 0},
		column{"unlock50", "unlock p50 (µs)", 0},
		column{"unlock99", "unlock p99 (µs)", 0},
		column{colRoundTrips, "round trips/pair", 2},
		column{colCommands, "commands/pair", 2},
		column{colRedisCommands, "Redis commands/pair", 2},
		column{"allocs", "allocs/pair", 1},
	)
	return scenario{table: t, run: func(ctx context.Context, e *env, lib library) (figures, error) {
		return runUncontended(ctx, e, lib, t)
	}}
}

func runUncontended(ctx context.Context, e *env, lib library, t *table) (f figures, err error) {
	wc := &wireCounter{}
	s, err := e.open(ctx, lib, e.cfg.lease, wc)
	if err != nil {
		return nil, err
	}
	defer closeAll(&err, s)
	key := e.key("uncontended")
	capacity := int(e.cfg.run.Seconds()*100_000) + 1024
	locks := make([]time.Duration, 0, capacity)
	unlocks := make([]time.Duration, 0, capacity)

	runtime.GC()
	before, err := readStats(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	wire0 := wc.snapshot()
	start := time.Now()
	for end := start.Add(e.cfg.run); time.Now().Before(end) && ctx.Err() == nil; {
		t0 := time.Now()
		release, err := s.lock(ctx, key)
		if err != nil {
			return nil, err
		}
		t1 := time.Now()
		if err := release(); err != nil {
			return nil, err
		}
		locks = append(locks, t1.Sub(t0))
		unlocks = append(unlocks, time.Since(t1))
	}
	elapsed := time.Since(start)
	wire := wc.snapshot().sub(wire0)
	runtime.ReadMemStats(&mem1)
	after, err := readStats(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	redis := after.since(before)
	pairs := float64(len(locks))
	t.detail[lib.name] = "Redis commands per pair: " + redis.breakdown(pairs)
	return figures{
		colPairsPerSec:   pairs / elapsed.Seconds(),
		"lock50":         micros(percentile(locks, 0.50)),
		"lock99":         micros(percentile(locks, 0.99)),
		"unlock50":       micros(percentile(unlocks, 0.50)),
		"unlock99":       micros(percentile(unlocks, 0.99)),
		colRoundTrips:    float64(wire.roundTrips) / pairs,
		colCommands:      float64(wire.commands) / pairs,
		colRedisCommands: float64(redis.commands()) / pairs,
		"allocs":         float64(mem1.Mallocs-mem0.Mallocs) / pairs,
	}, nil
}
