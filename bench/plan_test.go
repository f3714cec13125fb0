package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestDefaultPlanRunsEveryContendedCase(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	scenarios, checks := plan(cfg)
	titles := map[string]bool{}
	for _, s := range scenarios {
		titles[s.table.title] = true
		if strings.HasPrefix(s.table.title, "6.") || strings.HasPrefix(s.table.title, "7.") || strings.HasPrefix(s.table.title, "9.") {
			t.Errorf("%q runs by default", s.table.title)
		}
	}
	contended := 0
	for _, clients := range []string{"one client shared by all workers (one process)", "one client per worker (one process each)"} {
		for _, hold := range []string{"0s", "1ms"} {
			for _, w := range []int{8, 32} {
				title := fmt.Sprintf("3. Contended: W = %d workers on one key, hold %s, %s", w, hold, clients)
				if !titles[title] {
					t.Errorf("missing from the default run: %q", title)
				}
				contended++
			}
		}
	}
	targets := map[string]int{}
	for _, v := range judge(checks) {
		n, _, _ := strings.Cut(v.target, ".")
		targets[n]++
	}
	// 1: floor, best peer, round trips, allocations, Redis usec; 2:
	// commands per second and in all; 3: acq/s, Jain, wait max and Redis
	// usec in every case, wait p99 with a hold of 1 ms; 4: acq/s and
	// Redis usec; 8: Acquire with limit 1 against Lock (rate, two
	// latencies, Redis usec, allocations, round trips), and the permits'
	// acq/s and how many held at once with one client and a client per
	// worker.
	want := map[string]int{"1": 5, "2": 2, "3": 4*contended + contended/2, "4": 2, "5": 2, "8": 6 + 2*2}
	for n, k := range want {
		if targets[n] != k {
			t.Errorf("scenario %s: %d targets, want %d", n, targets[n], k)
		}
	}
	if len(targets) != len(want) {
		t.Errorf("targets by scenario %v, want %v", targets, want)
	}
}

func TestMemoryPlan(t *testing.T) {
	cfg, err := parseFlags([]string{"-scenarios", "7", "-memkeys", "100000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	scenarios, checks := plan(cfg)
	if len(scenarios) != 1 || !strings.HasPrefix(scenarios[0].table.title, "7. Memory: 100,000 distinct keys") {
		t.Fatalf("scenarios %v, want scenario 7 over 100,000 keys", scenarios)
	}
	if len(checks) != 2 {
		t.Errorf("%d checks, want 2 (used_memory after one lease, keys without TTL)", len(checks))
	}
}

func TestSharedMemoryPlan(t *testing.T) {
	cfg, err := parseFlags([]string{"-scenarios", "9", "-memkeys", "100000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	scenarios, checks := plan(cfg)
	if len(scenarios) != 1 || !strings.HasPrefix(scenarios[0].table.title, "9. Memory of semaphores: 100,000 distinct keys acquired (limit 3)") {
		t.Fatalf("scenarios %v, want scenario 9 over 100,000 keys", scenarios)
	}
	if rows := scenarios[0].rows(); len(rows) != 1 || rows[0].name != "Acquire, limit 3" || rows[0].most() != 3 {
		t.Errorf("rows %v, want Acquire with limit 3 alone", rows)
	}
	if len(checks) != 3 {
		t.Errorf("%d checks, want 3 (used_memory after one lease, keys without TTL, keys left)", len(checks))
	}
}
