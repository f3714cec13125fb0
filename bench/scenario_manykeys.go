package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"
)

// manyKeys is scenario 4: workers goroutines on one client lock and unlock
// keys drawn at random from keys distinct ones.
func manyKeys(workers, keys int) scenario {
	t := newTable(fmt.Sprintf("4. Many keys: %d workers over %s keys, one shared client, no hold", workers, formatNum(float64(keys), 0)),
		"Each worker locks and unlocks a key drawn at random, again and again. "+
			clientCPUNote+redisUsecNote+
			"Locks lost: releases that found the lock gone.",
		column{colAcqPerSec, "acq/s", 0},
		column{"wait99", "wait p99 (ms)", 2},
		column{colRedisUsec, "Redis usec/acq", 1},
		column{colRedisCPU, "Redis CPU/acq (µs)", 1},
		column{colClientCPU, "client CPU/acq (µs)", 1},
		column{"rt", "round trips/acq", 2},
		column{colLost, "locks lost", 0},
	)
	return scenario{table: t, run: func(ctx context.Context, e *env, lib library) (figures, error) {
		return runManyKeys(ctx, e, lib, t, workers, keys)
	}}
}

func runManyKeys(ctx context.Context, e *env, lib library, t *table, workers, keys int) (f figures, err error) {
	wc := &wireCounter{}
	s, err := e.open(ctx, lib, e.cfg.lease, wc)
	if err != nil {
		return nil, err
	}
	defer closeAll(&err, s)
	names := make([]string, keys)
	for i := range names {
		names[i] = e.key("k" + strconv.Itoa(i))
	}
	holders := make([]atomic.Int32, keys)
	waits := make([][]time.Duration, workers)
	var lost losses

	before, err := readStats(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	cpu0, err := processCPU()
	if err != nil {
		return nil, err
	}
	wire0 := wc.snapshot()
	runCtx, stop := context.WithTimeout(ctx, e.cfg.run)
	defer stop()
	start := time.Now()
	err = runWorkers(workers, func(w int) error {
		for runCtx.Err() == nil {
			k := rand.IntN(keys)
			t0 := time.Now()
			release, err := s.lock(runCtx, names[k])
			t1 := time.Now()
			if err != nil {
				if runCtx.Err() == nil {
					return err
				}
				return nil // the run ended during a wait; too short to matter here
			}
			if holders[k].Add(1) != 1 {
				return fmt.Errorf("two workers held %s at once", names[k])
			}
			holders[k].Add(-1)
			if err := lost.check(release()); err != nil {
				return err
			}
			waits[w] = append(waits[w], t1.Sub(t0))
		}
		return nil
	})
	elapsed := min(time.Since(start), e.cfg.run)
	if err != nil {
		return nil, err
	}
	cpu1, err := processCPU()
	if err != nil {
		return nil, err
	}
	wire := wc.snapshot().sub(wire0)
	after, err := readStats(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	var all []time.Duration
	for _, w := range waits {
		all = append(all, w...)
	}
	acqs := float64(len(all))
	redis := after.since(before)
	usec := redis.sentTime(wire.sent)
	t.detail[lib.name] = joinNotes(lost.note(), "Redis time per call of the commands sent: "+usec.perCall(acqs, "acq"))
	return figures{
		colAcqPerSec: acqs / elapsed.Seconds(),
		"wait99":     millis(percentile(all, 0.99)),
		colRedisUsec: usec.usec / acqs,
		colRedisCPU:  redis.cpu / acqs * 1e6,
		colClientCPU: micros(cpu1-cpu0) / acqs,
		"rt":         float64(wire.roundTrips) / acqs,
		colLost:      lost.count(),
	}, nil
}
