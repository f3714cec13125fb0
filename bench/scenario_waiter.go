package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

const (
	colWaiterCommands = "waiter commands/s"
	colWaiterTotal    = "waiterTotal"
)

// blockedWaiter is scenario 2: one client holds a key while another waits
// for it; only the waiter's traffic counts.
func blockedWaiter(cfg config) scenario {
	t := newTable(fmt.Sprintf("2. One blocked waiter while another client holds the key for %v", cfg.hold),
		fmt.Sprintf("Counted on the waiter's socket from its lock call until the holder's release: everything it sent, "+
			"its first attempt and its subscription included. The waiter's client has waited once before, as in a "+
			"running service (1.5 s before), so a pub/sub connection it keeps is already open. \"Steady\" leaves out the first %v. "+
			"Wake-up is from the holder's release returning to the waiter's lock returning.", settle(cfg.hold)),
		column{colWaiterCommands, "commands/s", 2},
		column{"steady", "commands/s, steady", 2},
		column{"waiterRT", "round trips/s", 2},
		column{colWaiterTotal, "commands in all", 0},
		column{"wake", "wake-up (ms)", 2},
	)
	return scenario{table: t, run: func(ctx context.Context, e *env, lib library) (figures, error) {
		return runBlockedWaiter(ctx, e, lib, t)
	}}
}

type lockResult struct {
	release func() error
	err     error
	at      time.Time
}

func runBlockedWaiter(ctx context.Context, e *env, lib library, t *table) (f figures, err error) {
	holder, err := e.open(ctx, lib, e.cfg.lease, &wireCounter{})
	if err != nil {
		return nil, err
	}
	defer closeAll(&err, holder)
	wc := &wireCounter{}
	waiter, err := e.open(ctx, lib, e.cfg.lease, wc)
	if err != nil {
		return nil, err
	}
	defer closeAll(&err, waiter)
	if _, err := waitOnce(ctx, holder, waiter, e.key("warm-up wait"), 50*time.Millisecond, nil); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	// As in a running service, the earlier wait ended a while ago: what
	// a library does after a wait (lockkit drops the key's subscription a
	// second later) is not counted as this wait's.
	if err := sleepCtx(ctx, warmUpRest); err != nil {
		return nil, err
	}
	w, err := waitOnce(ctx, holder, waiter, e.key("waiter"), e.cfg.hold, wc)
	if err != nil {
		return nil, err
	}
	t.detail[lib.name] = "commands sent: " + w.all.names()
	sec := e.cfg.hold.Seconds()
	return figures{
		colWaiterCommands: float64(w.all.commands()) / sec,
		"steady":          float64(w.steady.commands()) / (sec - settle(e.cfg.hold).Seconds()),
		"waiterRT":        float64(w.all.roundTrips) / sec,
		colWaiterTotal:    float64(w.all.commands()),
		"wake":            millis(w.wake),
	}, nil
}

// warmUpRest is the pause between the warm-up wait and the measured one.
const warmUpRest = 1500 * time.Millisecond

// sleepCtx sleeps for d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settle is the start of a wait that "steady" leaves out.
func settle(hold time.Duration) time.Duration { return min(time.Second, hold/3) }

// aWait is what one waiter did while blocked: everything it sent, what it
// sent after settling, and its wake-up latency.
type aWait struct {
	all, steady wireCount
	wake        time.Duration
}

// waitOnce has holder take key, waiter wait for it for hold, then the
// holder release it; the waiter's traffic is read from wc when given.
func waitOnce(ctx context.Context, holder, waiter *session, key string, hold time.Duration, wc *wireCounter) (aWait, error) {
	var w aWait
	if wc == nil {
		wc = &wireCounter{} // nobody reads it
	}
	unlock, err := holder.lock(ctx, key)
	if err != nil {
		return w, err
	}
	wire0 := wc.snapshot()
	got := make(chan lockResult, 1)
	go func() {
		release, err := waiter.lock(ctx, key)
		got <- lockResult{release, err, time.Now()}
	}()
	// holding keeps the key for d, or ends early if the waiter returned.
	holding := func(d time.Duration) error {
		select {
		case r := <-got:
			if r.err == nil {
				_ = r.release()
				r.err = errors.New("the waiter got the key while it was held")
			}
			return errors.Join(r.err, unlock())
		case <-time.After(d):
			return nil
		}
	}
	if err := holding(settle(hold)); err != nil {
		return w, err
	}
	settled := wc.snapshot()
	if err := holding(hold - settle(hold)); err != nil {
		return w, err
	}
	end := wc.snapshot()
	w.all, w.steady = end.sub(wire0), end.sub(settled)
	err = unlock()
	released := time.Now()
	if err != nil {
		return w, err
	}
	r := <-got
	if r.err != nil {
		return w, r.err
	}
	w.wake = r.at.Sub(released)
	return w, r.release()
}
