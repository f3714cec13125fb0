// Package reliability holds lockkit's reliability suite: tests, against
// real redis-server processes on loopback, that fail when a lock is wrong
// under faults. The package has no code of its own; everything is in its
// _test.go files, and the figures it measures are in docs/reliability.md.
//
// What the suite shows:
//
//   - Mutual exclusion across processes: the test binary re-executes itself
//     as 4 worker processes with 3 Clients each, which run critical
//     sections on one key, each a non-atomic GET/SET increment of two
//     stores on a Redis of their own, reached directly: an unfenced
//     counter and a store fenced by tokens. Each section records its
//     fencing token and its enter, write and exit times from
//     CLOCK_MONOTONIC (one clock for every process on the machine): 2,000
//     on one Redis, 500 in quorum mode over 3. No two sections overlap,
//     tokens increase in entry order (across restarts too), no write is
//     stale (sent after another section entered), the fenced store
//     refuses no live holder's write and no increment is lost; on one
//     Redis, sections enter in the order their Lock calls queued. The
//     checker itself is tested on hand-made histories (TestAnalyse).
//   - The same under faults (TestFaults), each of which must reach a least
//     number of sections: latency spikes, a holder cut off for longer
//     than its lease and rolling cuts, connection resets (all through
//     toxiproxy, run as a library between each worker and Redis), Redis
//     killed and restarted empty (delayed by one lease), Redis frozen
//     with SIGSTOP, a process of queued waiters frozen, a holder frozen
//     just before its write, Redis filled past maxmemory, Sentinel
//     failovers with replica acknowledgement, a Redis Cluster master
//     killed. No overlap among sections whose holder's context was live,
//     every lost lease reported before anyone else entered, no stale
//     write taken and no increment lost, the workload completes. The
//     frozen holder shows what the lock context cannot do: its stale
//     write reaches the unfenced counter and costs increments; the
//     fenced store refuses it. The cut-off holder (cut past its second
//     renewal) is told at least half its drift allowance before its
//     lease lapses in Redis; so is a holder cut off after renewals, after
//     an acquisition or renewal whose reply came 700 ms late, or after a
//     hand-off whose message came 700 ms late
//     (TestLossNoticePrecedesTakeover); the Sentinel
//     phase must see acquisitions no replica confirmed. With a cold
//     script cache, 200 ms of latency must not cost a 1 s lease
//     (TestSlowRepliesKeepLease). A key given another owner behind the
//     holder's back ends the hold at its next renewal
//     (TestTakeoverEndsHold).
//   - A semaphore of one permit (Client.Acquire, share.lua) keeps every
//     promise of the lock the same way: TestMutualExclusion's 1,000
//     sections and six of the faults (TestFaultsOnASemaphoreOfOne).
//   - The worked example of docs/guarantees.md (TestProcessPause): a
//     holder frozen for twice its lease, whose stale write a fenced store
//     rejects. Restarts with and without persistence show what a
//     restarted Redis forgets.
//   - Operations outside the promises, measured: a replica promoted by
//     hand with clients left on the old primary (split brain, or an
//     outage with WithReplicaAck; TestManualPromotion), subscriptions
//     200-2000 ms late (TestSlowPubSubKeepsKeysLive), CLIENT PAUSE WRITE
//     longer than a lease (TestClientPauseWriteLongerThanLease), a
//     cluster master killed with full coverage required
//     (TestClusterFullCoverageLosesEveryLock).
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
