package main

import (
	"testing"
	"time"
)

func TestProcessCPUCountsWork(t *testing.T) {
	before, err := processCPU()
	if err != nil {
		t.Fatal(err)
	}
	// A busy loop until getrusage has counted 50 ms of it: on a machine
	// busy with other work the loop gets a share of a core, not all of
	// it, so the bound is on wall time, and generous. A column that
	// counted nothing would never get there.
	const work, limit = 50 * time.Millisecond, 10 * time.Second
	sum := 0
	for start := time.Now(); ; sum++ {
		if sum%100000 == 0 {
			now, err := processCPU()
			if err != nil {
				t.Fatal(err)
			}
			if now-before >= work {
				return
			}
			if time.Since(start) > limit {
				t.Fatalf("%v of a busy loop (%d turns) counted as %v of CPU, want %v", limit, sum, now-before, work)
			}
		}
	}
}
