// Package reliability holds lockkit's reliability suite: tests, against
// real redis-server processes on loopback, that fail when a lock is wrong
// under faults. The package has no code of its own; everything is in its
// _test.go files, and the figures it measures are in docs/reliability.md.
//
// What the suite shows:
//
//   - Mutual exclusion across processes: the test binary re-executes itself
//     as 4 worker processes with 3 Clients each, which run critical
//     sections on one key, each a non-atomic GET/SET increment, recording
//     fencing token, enter and exit time from CLOCK_MONOTONIC (one clock
//     for every process on the machine): 2,000 on one Redis, 500 in quorum
//     mode over 3. No two sections overlap, tokens increase in entry order
//     and the counter equals the number of sections.
//   - The same under faults injected by toxiproxy, run as a library between
//     each worker and Redis: 200 ms latency spikes, one holder's connection
//     cut for longer than its lease (its context is cancelled with
//     lock.ErrLost before anyone else enters), connection resets, and a
//     Redis restart without persistence (delayed by one lease). No overlap
//     among sections whose holder's context was still live, every lost
//     lease reported before anyone else entered, the workload completes.
//     With a cold script cache, 200 ms of latency must not cost a 1 s
//     lease (TestSlowRepliesKeepLease).
//   - Process pauses: a holder frozen with SIGSTOP for twice its lease loses
//     the key to another process, and a store fenced by tokens rejects the
//     stale holder's write after SIGCONT (the worked example of
//     docs/guarantees.md). Restarts with and without persistence show what
//     a restarted Redis forgets.
//   - Hostile keys: a fuzz test of keys passed to lock (no collisions, no
//     script errors, bounded Redis key size); oversized keys are refused.
//   - Hygiene: 1,000 contended lock/unlock cycles cancelled at random
//     moments leave no goroutine, no pub/sub subscription and no key but
//     fencing counters.
//
// Run it with the rest of the module, or alone:
//
//	go test -race -count=1 ./internal/reliability/
//	go test -run '^$' -fuzz FuzzKeys -fuzztime 30s ./internal/reliability/
//
// Without redis-server on PATH the tests that need it skip, unless
// LOCKKIT_REQUIRE_REDIS=1 is set (as CI does).
package reliability
