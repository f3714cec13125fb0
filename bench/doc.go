// Command bench runs lockkit side by side with redsync, bsm/redislock and
// the floor (SET NX with a lease, compare-and-delete: one round trip each)
// on one Redis, and lockkit's semaphores and read-write locks beside its
// Lock, and prints the results as Markdown tables.
//
// From this folder:
//
//	go run .          # 3 interleaved rounds, about 6 minutes
//	go run . -smoke   # about a minute: shows the harness works (CI)
//	go run . -syscalls  # system calls per lock + unlock of every library, under strace
//	go run . -h       # the flags
//
// It starts its own redis-server (from PATH, or -redis-server) on a free
// loopback port without persistence and stops it by pid at the end, also
// on error or interrupt. It exits 1 when a run failed, 2 for bad flags;
// targets that are missed do not change the exit status. The scenarios,
// how each figure is measured and a reading of the results are in
// docs/benchmarks.md.
//
// The harness is a module of its own, so the libraries it compares never
// become dependencies of lockkit.
package main
