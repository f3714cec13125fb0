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
	sum := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		sum++
	}
	after, err := processCPU()
	if err != nil {
		t.Fatal(err)
	}
	// 50 ms of a busy loop: getrusage counts at least half of it, whatever its tick.
	if got := after - before; got < 25*time.Millisecond {
		t.Fatalf("50 ms of a busy loop (%d turns) counted as %v of CPU", sum, got)
	}
}
