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
		checks = append(checks, waiterChecks(s.table)...)
	}
	if cfg.scenarios[3] {
		// Every combination: one client shared, then a client per worker;
		// hold 0, then 1 ms; 8, then 32 workers.
		for _, perWorker := range []bool{false, true} {
			for _, hold := range []time.Duration{0, time.Millisecond} {
				for _, workers := range []int{8, 32} {
					s := contended(workers, hold, perWorker)
					scenarios = append(scenarios, s)
					checks = append(checks, contendedChecks(s.table, workers, hold, perWorker)...)
				}
			}
		}
	}
	if cfg.scenarios[4] {
		s := manyKeys(32, 1000)
		scenarios = append(scenarios, s)
		checks = append(checks, manyKeysChecks(s.table)...)
	}
	if cfg.scenarios[5] {
		s := manyHeld(cfg.locks, cfg.heldLease)
		scenarios = append(scenarios, s)
		checks = append(checks, heldChecks(s.table, cfg.locks)...)
	}
	if cfg.scenarios[6] {
		scenarios = append(scenarios, modes()...)
	}
	if cfg.scenarios[7] {
		s := memory(cfg.memKeys)
		scenarios = append(scenarios, s)
		checks = append(checks, memoryChecks(s.table, cfg.memKeys)...)
	}
	if cfg.scenarios[8] {
		s, c := shares(cfg.shareHold)
		scenarios = append(scenarios, s...)
		checks = append(checks, c...)
	}
	if cfg.scenarios[9] {
		s, c := sharedMemory(cfg.memKeys)
		scenarios = append(scenarios, s)
		checks = append(checks, c...)
	}
	return scenarios, checks
}
