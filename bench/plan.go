package main

import "time"

// plan returns the scenario cases cfg selects, in the order they run, and
// the checks of the targets over their tables.
func plan(cfg config) ([]scenario, []check) {
	var scenarios []scenario
	var checks []check
	if cfg.scenarios[1] {
		s := uncontended(cfg)
		scenarios = append(scenarios, s)
		checks = append(checks, uncontendedChecks(s.table)...)
	}
	if cfg.scenarios[2] {
		s := blockedWaiter(cfg)
		scenarios = append(scenarios, s)
		checks = append(checks, waiterCheck(s.table))
	}
	if cfg.scenarios[3] {
		for _, c := range []struct {
			workers   int
			hold      time.Duration
			perWorker bool
		}{
			{8, 0, false}, {32, 0, false},
			{8, time.Millisecond, false}, {32, time.Millisecond, false},
			{8, time.Millisecond, true}, {32, time.Millisecond, true},
		} {
			s := contended(c.workers, c.hold, c.perWorker)
			scenarios = append(scenarios, s)
			if c.hold > 0 {
				checks = append(checks, contendedChecks(s.table, c.workers, c.perWorker)...)
			}
		}
	}
	if cfg.scenarios[4] {
		scenarios = append(scenarios, manyKeys(32, 1000))
	}
	if cfg.scenarios[5] {
		s := manyHeld(cfg.locks, cfg.heldLease)
		scenarios = append(scenarios, s)
		checks = append(checks, heldChecks(s.table, cfg.locks)...)
	}
	if cfg.scenarios[6] {
		scenarios = append(scenarios, modes()...)
	}
	return scenarios, checks
}
