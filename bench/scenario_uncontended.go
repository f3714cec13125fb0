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
	colRedisCPU      = "cpu"
	colRedisUsec     = "redis usec"
	colClientCPU     = "client cpu"
	colAllocs        = "allocs"
)

// uncontended is scenario 1: one worker takes and releases one key over
// and over, nobody else around.
func uncontended(config) scenario {
	return uncontendedCase("1. Uncontended: one worker, sequential lock + unlock", nil)
}

// uncontendedCase is scenario 1's loop under title, for libs (the
// libraries when nil).
func uncontendedCase(title string, libs []library) scenario {
	t := newTable(title,
		"Round trips and commands are counted on the client's socket; Redis commands come from INFO commandstats "+
			"and include those run inside scripts (the list below each table, from the last round). "+
			redisUsecNote+
			"Redis CPU is INFO cpu's, per pair: its work on the commands, scripts and sockets. "+
			"Client CPU and allocations are the whole process's, per pair: the library's and the loop's, which is the same for every library.",
		pairColumns(
			column{colRedisCommands, "Redis commands/pair", 2},
			column{colRedisUsec, "Redis usec/pair", 1},
			column{colRedisCPU, "Redis CPU/pair (µs)", 1})...,
	)
	return scenario{table: t, libs: libs, run: func(ctx context.Context, e *env, lib library) (figures, error) {
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
	before, err := readStats(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	wire0 := wc.snapshot()
	f, pairs, err := measurePairs(ctx, s, e.key("uncontended"), e.cfg.run, wc)
	if err != nil {
		return nil, err
	}
	sent := wc.snapshot().sub(wire0).sent
	after, err := readStats(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	redis := after.since(before)
	usec := redis.sentTime(sent)
	t.detail[lib.name] = "Redis commands per pair: " + redis.breakdown(pairs) +
		"; Redis time per call of the commands sent: " + usec.perCall(pairs, "pair") +
		"; usec per call of every command, scripts' too: " + redis.usecEach()
	f[colRedisCommands] = float64(redis.commands()) / pairs
	f[colRedisUsec] = usec.usec / pairs
	f[colRedisCPU] = redis.cpu / pairs * 1e6
	return f, nil
}

// pairColumns are the columns of a lock + unlock loop: throughput,
// latencies and costs per pair, with extra ones before the allocations.
func pairColumns(extra ...column) []column {
	cols := []column{
		{colPairsPerSec, "pairs/s", 0},
		{"lock50", "lock p50 (µs)", 0},
		{"lock99", "lock p99 (µs)", 0},
		{"unlock50", "unlock p50 (µs)", 0},
		{"unlock99", "unlock p99 (µs)", 0},
		{colRoundTrips, "round trips/pair", 2},
		{colCommands, "commands/pair", 2},
	}
	return append(append(cols, extra...), column{colClientCPU, "client CPU/pair (µs)", 1}, column{colAllocs, "allocs/pair", 1})
}

// measurePairs runs timePairs and returns the figures of pairColumns (but
// the extra ones), counted on wc and the process's CPU time and
// allocations, and the number of pairs.
func measurePairs(ctx context.Context, l locker, key string, run time.Duration, wc *wireCounter) (figures, float64, error) {
	runtime.GC()
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	wire0 := wc.snapshot()
	cpu0, err := processCPU()
	if err != nil {
		return nil, 0, err
	}
	locks, unlocks, elapsed, err := timePairs(ctx, l, key, run)
	if err != nil {
		return nil, 0, err
	}
	cpu1, err := processCPU()
	if err != nil {
		return nil, 0, err
	}
	wire := wc.snapshot().sub(wire0)
	runtime.ReadMemStats(&mem1)
	pairs := float64(len(locks))
	return figures{
		colPairsPerSec: pairs / elapsed.Seconds(),
		"lock50":       micros(percentile(locks, 0.50)),
		"lock99":       micros(percentile(locks, 0.99)),
		"unlock50":     micros(percentile(unlocks, 0.50)),
		"unlock99":     micros(percentile(unlocks, 0.99)),
		colRoundTrips:  float64(wire.roundTrips) / pairs,
		colCommands:    float64(wire.commands()) / pairs,
		colClientCPU:   micros(cpu1-cpu0) / pairs,
		colAllocs:      float64(mem1.Mallocs-mem0.Mallocs) / pairs,
	}, pairs, nil
}

// timePairs locks and unlocks key with l, one pair after the other, for
// run (at least one pair), and returns how long each lock and each unlock
// took and how long it all took.
func timePairs(ctx context.Context, l locker, key string, run time.Duration) (locks, unlocks []time.Duration, elapsed time.Duration, err error) {
	capacity := int(run.Seconds()*50_000) + 16
	locks = make([]time.Duration, 0, capacity)
	unlocks = make([]time.Duration, 0, capacity)
	start := time.Now()
	for end := start.Add(run); len(locks) == 0 || time.Now().Before(end); {
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, err
		}
		t0 := time.Now()
		release, err := l.lock(ctx, key)
		if err != nil {
			return nil, nil, 0, err
		}
		t1 := time.Now()
		if err := release(); err != nil {
			return nil, nil, 0, err
		}
		locks = append(locks, t1.Sub(t0))
		unlocks = append(unlocks, time.Since(t1))
	}
	return locks, unlocks, time.Since(start), nil
}
