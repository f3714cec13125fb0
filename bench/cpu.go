package main

import (
	"fmt"
	"syscall"
	"time"
)

// clientCPUNote says what a "client CPU/acq" column counts.
const clientCPUNote = "Client CPU is the whole process's (getrusage, user + system), per acquisition: " +
	"the library's and the workers' loop's, the same for every library. "

// processCPU is the CPU time, user and system, that this process has used
// so far (getrusage): the harness's and that of the clients of the library
// under test, which run in it.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
