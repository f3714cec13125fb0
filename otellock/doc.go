// Package otellock records OpenTelemetry spans and metrics of the locks a
// [lock.Client] takes: how long each caller waited, with what outcome and
// at what place in the queue, whether it re-entered, which fencing token
// it got, how long it held the lock, and whether and why a lease was
// lost.
//
// An [Observer] is a [lock.Observer]; attach it when creating the Client.
// Everything that takes a [lock.Locker], such as packages ginlock and
// cronlock, is then traced without change:
//
//	obs, err := otellock.New() // the global TracerProvider and MeterProvider
//	if err != nil { ... }
//	locker, err := lock.New(rdb, lock.WithObserver(obs))
//
// # Spans
//
// Every Lock and TryLock call gets a lock.acquire span, a child of the
// span in the caller's context, that ends when the call returns; the
// call's Redis commands run under it. When the lock is obtained, a
// lock.hold span starts, also a child of the caller's span, and is put in
// the returned lock context: spans of the critical section become its
// children. It ends at unlock, or when the lease is lost (the event
// lock.lost with its reason, status Error) or the Client closed (the
// event lock.closed, no failure). A TryLock that finds the key held, a
// Lock whose wait limit passed while the key was held, a cancelled wait
// and a call that a graceful Close ended are outcomes
// (lock.acquire.outcome), not errors; a Redis failure (also a Redis that
// did not answer before the call's deadline or wait limit), a bad argument
// or a call after Close is an error, with the attribute error.type.
//
// A lock taken with a context without a span, as a cron job does, makes the
// lock.hold span the root of a trace; it links to its lock.acquire span.
//
// Renewals and the Client's other background work make no spans, and
// their Redis commands start no trace in a tracing Redis client (see
// [Observer.Background]); locks that integrations take for their own
// bookkeeping ([lock.Integration.Internal], such as cronlock's tick markers) get
// metrics but no spans unless [WithInternalSpans] is given.
//
// # Metrics
//
// Durations are histograms in seconds with bucket boundaries from 100 µs
// to 10 min: lock.acquire.duration, lock.hold.duration and
// lock.renewal.duration. lock.held counts hold levels held now,
// lock.waiting the Lock calls waiting their turn now, lock.acquire.outcomes
// counts calls by outcome, lock.lost lost leases by reason and
// lock.renewals the watchdog's renewals by outcome.
//
// # Semaphores and read-write locks
//
// [lock.Client.Acquire] and [lock.Client.RLock] calls and their holds get
// the same spans and metrics as Lock, with the attribute lock.kind:
// "semaphore" or "read" ("lock" for Lock and TryLock, on spans only, so
// that a lock's metric points keep the attributes they always had). A
// semaphore's spans and metric points also carry its limit, lock.limit
// (pass one limit per lock name, or the points multiply). The permits of
// a semaphore this process holds now are
// lock.held{lock.kind="semaphore", lock.reentrant="false"} of its
// lock.name, of lock.limit; read holds likewise with lock.kind="read".
//
// # Lock names
//
// Metrics must have few distinct attribute values, so they carry
// lock.name, never the raw key: the name given with [lock.WithName]
// (ginlock gives its key template, cronlock the job's keys), else the
// one the function given to [WithLockName] or by default [DefaultLockName]
// derives from the key ("orders:42" → "orders"). An Observer records at
// most [DefaultMaxLockNames] distinct names ([WithMaxLockNames]), then
// "_OTHER"; internal locks ([lock.Integration.Internal]) have a cap of their own.
// [WithRawKey] adds the key to spans.
//
// docs/observability.md in the repository lists every span, attribute,
// event and metric.
//
// # Cost
//
// The Observer adds no Redis command. It builds spans' attributes only when
// they record and metrics' attributes only when an instrument is enabled,
// and keeps no state for a lock that nothing records: with no-op providers
// it allocates nothing of its own, and a Lock with its unlock costs it
// about 0.2 µs, most of it in the tracer's Start (see BenchmarkObserver
// and docs/observability.md).
package otellock
