package lock

import (
	"context"
	"fmt"
)

// Acquire blocks until it holds one of limit permits of key (limit ≥ 1),
// ctx is done, or the wait limit set with [WithMaxWait] passes: a counting
// semaphore, at most limit holders of key at once across every Client.
//
// Each permit is a lease as a lock is: the watchdog renews it, its context
// is cancelled with cause [ErrLost] before the permit can be given to
// anyone else, a dead holder's permit comes back within one lease, and
// each acquisition gets a fencing token larger than every token of key
// before it. Waiters get permits in arrival order across all Clients and
// sleep until handed one, as Lock's waiters do (see "Waiting" in the
// package documentation). A context that holds a permit of key re-enters
// it (the hold count goes up; no second permit is taken).
//
// Callers of one key pass the same limit: while the key has holders or
// waiters, a call with another limit returns an error wrapping
// [ErrInvalid] that names both, and changes nothing; the limit of a key
// nobody holds or waits for is the next caller's. A key held by [Client.Lock]
// or read-write locked ([Client.RLock]) is refused in the same way, as
// Redis refuses a command on a key of another type.
//
// The options, the returned context and [UnlockFunc], and the other
// errors are those of [Client.Lock]. Quorum mode ([NewQuorum]) has no
// semaphores: the call returns an error wrapping [ErrInvalid].
func (c *Client) Acquire(ctx context.Context, key string, limit int, opts ...LockOption) (context.Context, UnlockFunc, error) {
	return c.acquireKind(ctx, key, false, sharePermit, limit, opts)
}

// TryAcquire makes one attempt at a permit of key, as [Client.TryLock]
// does at a lock: [ErrNotObtained] at once when limit holders hold key or
// waiters are queued for it; it never joins the queue. Otherwise it
// behaves as [Client.Acquire].
func (c *Client) TryAcquire(ctx context.Context, key string, limit int, opts ...LockOption) (context.Context, UnlockFunc, error) {
	return c.acquireKind(ctx, key, true, sharePermit, limit, opts)
}

// RLock takes key shared: any number of readers hold it together, never
// with a [Client.Lock] of the same key, which is its writer. A writer that
// queues holds up the readers that come after it, so a steady stream of
// readers does not starve writers; the readers queued behind a writer go
// in together when it leaves. Read holds are leases with a watchdog and
// fencing tokens as locks are.
//
// Re-entry: a context that holds a read hold of key re-enters it; a
// context that holds key's write lock (a Lock of key) takes read holds of
// it as re-entries of the write lock. A context that holds a read hold
// and calls Lock of the same key gets an error wrapping [ErrInvalid] at
// once, as it would wait for itself.
//
// A key used as a semaphore ([Client.Acquire]) is refused with an error
// wrapping [ErrInvalid]. The options, the returned context and
// [UnlockFunc], and the other errors are those of [Client.Lock]. Quorum
// mode ([NewQuorum]) has no read-write locks: the call returns an error
// wrapping [ErrInvalid].
func (c *Client) RLock(ctx context.Context, key string, opts ...LockOption) (context.Context, UnlockFunc, error) {
	return c.acquireKind(ctx, key, false, shareRead, 0, opts)
}

// TryRLock makes one attempt at a read hold of key, as [Client.TryLock]
// does at a lock: [ErrNotObtained] at once when a writer holds key or
// waiters are queued for it. Otherwise it behaves as [Client.RLock].
func (c *Client) TryRLock(ctx context.Context, key string, opts ...LockOption) (context.Context, UnlockFunc, error) {
	return c.acquireKind(ctx, key, true, shareRead, 0, opts)
}

// shareKind is the kind of a hold in Redis: a lock (acquire.lua), or a
// hold that share.lua keeps among others: a permit, a read hold, the
// write hold of a read-write lock. The byte is share.lua's argument.
type shareKind uint32

const (
	shareNone   shareKind = 0
	sharePermit shareKind = 'p'
	shareRead   shareKind = 'r'
	shareWrite  shareKind = 'w'
)

// arg is the kind as share.lua's argument, boxed once.
func (k shareKind) arg() any {
	switch k {
	case sharePermit:
		return "p"
	case shareRead:
		return "r"
	}
	return "w"
}

// Kind is what an observer is told: "lock" (a Lock or TryLock, the write
// lock of a read-write lock too), "semaphore" or "read".
func (k shareKind) Kind() string {
	switch k {
	case sharePermit:
		return KindSemaphore
	case shareRead:
		return KindRead
	}
	return KindLock
}

// The kinds of acquisition an [Observer] is told of (Acquire.Kind), and
// the kinds of key [LockInfo] reports (a lock, a semaphore, or a
// read-write lock, whose holders are read holds and the write hold).
const (
	KindLock      = "lock"       // Lock, TryLock; the write hold of a read-write lock
	KindSemaphore = "semaphore"  // Acquire, TryAcquire
	KindRead      = "read"       // RLock, TryRLock
	KindReadWrite = "read-write" // a key with read holds, or a write hold taken among them
)

// checkShare validates a shared call before anything else: a limit, and
// a backend with shared holds.
func (c *Client) checkShare(kind shareKind, limit int) error {
	switch {
	case kind == sharePermit && limit < 1:
		return invalidf("a semaphore's limit must be at least 1, got %d", limit)
	case kind != shareNone && !c.be.queued():
		return invalidf("quorum mode has no semaphores or read-write locks")
	}
	return nil
}

// reentryKind returns how a call of kind (limit for a permit) enters
// outer's hold, or the error when it cannot: a read hold asked for the
// write lock, a permit asked for as a lock, another limit.
func reentryKind(key string, outer *hold, kind shareKind, limit int) error {
	have := outer.kind()
	if have == shareWrite {
		have = shareNone // a Lock whose key turned out to be a read-write lock's
	}
	switch {
	case have == kind && (kind != sharePermit || outer.limit == limit):
		return nil
	case have == sharePermit && kind == sharePermit:
		return invalidf("the context holds a permit of %q with limit %d, not %d", key, outer.limit, limit)
	case kind == shareRead && (have == shareNone || have == shareWrite):
		return nil // the writer takes read holds of its key
	case have == shareRead && kind == shareNone:
		return invalidf("the context holds a read lock of %q: Lock of the same key would wait for itself", key)
	}
	return invalidf("the context holds %q as a %s, not a %s", key, have.Kind(), kind.Kind())
}

// refusal is the error of share.lua's or acquire.lua's refusal v of key
// (see share.lua), or nil.
func refusal(key string, kind shareKind, limit int, v []int64) error {
	switch {
	case v[0] == -4 && len(v) == 2:
		return invalidf("%q is a semaphore with limit %d, not %d", key, v[1], limit)
	case v[0] != -3:
		return nil
	}
	want := "a lock"
	switch kind {
	case sharePermit:
		want = "a semaphore"
	case shareRead:
		want = "a read-write lock"
	}
	switch {
	case len(v) == 2 && v[1] == 1:
		return invalidf("%q is used as a lock, not as %s", key, want)
	case len(v) == 3 && v[1] == 2:
		return invalidf("%q is used as a semaphore with limit %d, not as %s", key, v[2], want)
	case len(v) == 2 && v[1] == 3:
		return invalidf("%q is used as a read-write lock, not as %s", key, want)
	}
	return fmt.Errorf("lock: unexpected reply %v", v)
}
