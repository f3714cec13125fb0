package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	colAcqPerSec = "acq/s"
	colWait99    = "wait99"
	colWaitMax   = "waitMax"
	colJain      = "jain"
	colMost      = "most"  // the most workers that held the key at once
	colBusy      = "busy"  // % of the time the key's room was held: of its limit's worth, or the workers'
	colCores     = "cores" // CPU time of the process and of Redis per second of the run
	colHold50    = "hold50"
	colRelease50 = "release50"
	colRelease99 = "release99"
)

// contended is scenario 3: workers goroutines want one key all the time
// and hold it for hold each time. With perWorker each worker has its own
// client (as separate processes would); otherwise all share one.
func contended(workers int, hold time.Duration, perWorker bool) scenario {
	return contendedCase(fmt.Sprintf("3. Contended: W = %d workers on one key, hold %v, %s", workers, hold, clientsOf(perWorker)),
		nil, workers, hold, perWorker)
}

// clientsOf names the clients of a contended case.
func clientsOf(perWorker bool) string {
	if perWorker {
		return "one client per worker (one process each)"
	}
	return "one client shared by all workers (one process)"
}

// contendedCase is scenario 3's run under title, for libs (the libraries
// when nil), with extra columns before the locks lost.
func contendedCase(title string, libs []library, workers int, hold time.Duration, perWorker bool, extra ...column) scenario {
	cols := []column{
		{colAcqPerSec, "acq/s", 0},
		{"wait50", "wait p50 (ms)", 2},
		{colWait99, "wait p99 (ms)", 2},
		{colWaitMax, "wait max (ms)", 1},
		{"handoff50", "handoff p50 (ms)", 2},
		{"handoff99", "handoff p99 (ms)", 2},
		{colJain, "Jain", 3},
		{colRedisUsec, "Redis usec/acq", 1},
		{colRedisCPU, "Redis CPU/acq (µs)", 1},
		{colClientCPU, "client CPU/acq (µs)", 1},
		{"rt", "round trips/acq", 2},
	}
	cols = append(append(cols, extra...), column{colLost, "locks lost", 0})
	t := newTable(title,
		"Wait is from a worker's lock call to its return; waits still open when the run ends count with the time "+
			"waited so far. Handoff is from a release returning to the next holder's lock returning (none, \"—\", where several hold the key at once). "+
			"Jain's index is over acquisitions per worker (1 = all equal). Round trips include the unlocks. "+
			clientCPUNote+redisUsecNote+
			"Locks lost: releases that found the lock gone.",
		cols...,
	)
	return scenario{table: t, libs: libs, run: func(ctx context.Context, e *env, lib library) (figures, error) {
		return runContended(ctx, e, lib, t, workers, hold, perWorker)
	}}
}

// A tenure is one acquisition: when the holder's lock returned, when it
// called release after its hold, and when its release returned.
type tenure struct{ acquired, releasing, released time.Time }

// workerLog is what one worker saw.
type workerLog struct {
	waits   []time.Duration
	tenures []tenure
}

func runContended(ctx context.Context, e *env, lib library, t *table, workers int, hold time.Duration, perWorker bool) (f figures, err error) {
	wc := &wireCounter{}
	sessions := make([]*session, workers)
	for i := range sessions {
		if i > 0 && !perWorker {
			sessions[i] = sessions[0]
			continue
		}
		s, openErr := e.open(ctx, lib, e.cfg.lease, wc)
		if openErr != nil {
			return nil, openErr
		}
		defer closeAll(&err, s)
		sessions[i] = s
	}
	key := e.key("contended")

	before, err := readStats(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	cpu0, err := processCPU()
	if err != nil {
		return nil, err
	}
	wire0 := wc.snapshot()
	logs := make([]workerLog, workers)
	var holders, most, late atomic.Int64
	var lost losses
	runCtx, stop := context.WithTimeout(ctx, e.cfg.run)
	defer stop()
	start := time.Now()
	err = runWorkers(workers, func(i int) error {
		s, log := sessions[i], &logs[i]
		for runCtx.Err() == nil {
			t0 := time.Now()
			release, err := s.lock(runCtx, key)
			t1 := time.Now()
			if err != nil {
				if runCtx.Err() == nil {
					return err
				}
				log.waits = append(log.waits, t1.Sub(t0)) // still waiting at the end
				return nil
			}
			n := holders.Add(1)
			if n > int64(lib.most()) {
				return fmt.Errorf("%d workers held the key at once, at most %d may", n, lib.most())
			}
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if hold > 0 {
				time.Sleep(hold)
			}
			holders.Add(-1)
			t2 := time.Now()
			if err := lost.check(release()); err != nil {
				// A release made as the run ends has the run's deadline
				// and its grace; on a starved CPU it may not be confirmed
				// within them, and goes on in the background.
				if runCtx.Err() == nil || !errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				late.Add(1)
			}
			log.waits = append(log.waits, t1.Sub(t0))
			log.tenures = append(log.tenures, tenure{t1, t2, time.Now()})
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

	var waits []time.Duration
	var tenures []tenure
	perWorkerAcqs := make([]int, workers)
	for i, l := range logs {
		waits = append(waits, l.waits...)
		tenures = append(tenures, l.tenures...)
		perWorkerAcqs[i] = len(l.tenures)
	}
	redis := after.since(before)
	usec := redis.sentTime(wire.sent)
	var held time.Duration
	holds := make([]time.Duration, len(tenures))
	releases := make([]time.Duration, len(tenures))
	for i, tn := range tenures {
		// Within the run: a take can return after it ended, on a busy machine.
		held += max(minTime(tn.released, start.Add(elapsed)).Sub(tn.acquired), 0)
		holds[i], releases[i] = tn.releasing.Sub(tn.acquired), tn.released.Sub(tn.releasing)
	}
	busy := held.Seconds() / elapsed.Seconds() / float64(min(lib.most(), workers))
	clientCPU := cpu1 - cpu0
	handoffs := handoffTimes(tenures)
	acqs := float64(len(tenures))
	lateNote := ""
	if n := late.Load(); n > 0 {
		lateNote = fmt.Sprintf("%d release(s) at the run's end not confirmed within the run's deadline and its grace", n)
	}
	t.detail[lib.name] = joinNotes(lost.note(), lateNote, "Redis commands per acq: "+redis.breakdown(acqs),
		"Redis time per call of the commands sent: "+usec.perCall(acqs, "acq"))
	f = figures{
		colAcqPerSec: acqs / elapsed.Seconds(),
		"wait50":     millis(percentile(waits, 0.50)),
		colWait99:    millis(percentile(waits, 0.99)),
		colWaitMax:   millis(percentile(waits, 1)),
		"handoff50":  millis(percentile(handoffs, 0.50)),
		"handoff99":  millis(percentile(handoffs, 0.99)),
		colJain:      jain(perWorkerAcqs),
		colRedisUsec: usec.usec / acqs,
		colRedisCPU:  redis.cpu / acqs * 1e6,
		colClientCPU: micros(clientCPU) / acqs,
		"rt":         float64(wire.roundTrips) / acqs,
		colLost:      lost.count(),
		colMost:      float64(most.Load()),
		colHold50:    millis(percentile(holds, 0.5)),
		colRelease50: millis(percentile(releases, 0.5)),
		colRelease99: millis(percentile(releases, 0.99)),
		colBusy:      100 * busy,
		colCores:     (clientCPU.Seconds() + redis.cpu) / elapsed.Seconds(),
	}
	if lib.most() > 1 { // holders overlap: there is no hand-off from one to the next
		delete(f, "handoff50")
		delete(f, "handoff99")
	}
	return f, nil
}

// handoffTimes returns, for every acquisition but the first, the time from
// the previous holder's release returning to its lock returning. It can be
// negative: the next holder may get the key before the releasing call has
// read its reply.
func handoffTimes(ts []tenure) []time.Duration {
	slices.SortFunc(ts, func(a, b tenure) int { return a.acquired.Compare(b.acquired) })
	var hs []time.Duration
	for i := 1; i < len(ts); i++ {
		hs = append(hs, ts[i].acquired.Sub(ts[i-1].released))
	}
	return hs
}

// runWorkers runs work(0) … work(n-1) in goroutines and returns the first
// error once all have returned.
func runWorkers(n int, work func(i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = work(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
