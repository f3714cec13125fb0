// Package lock is a reentrant distributed lock on Redis whose ownership
// travels in a [context.Context] and whose lease is kept alive by a
// watchdog.
//
// Take a lock, do the work with the returned context, unlock:
//
//	locker, err := lock.New(rdb) // rdb is a *redis.Client or *redis.ClusterClient
//	if err != nil { ... }
//	defer locker.Close()
//
//	ctx, unlock, err := locker.Lock(ctx, "orders:42")
//	if err != nil { ... }      // lock.ErrNotObtained, a Redis error, ...
//	defer unlock()
//	pay(ctx)                   // ctx is cancelled with cause lock.ErrLost if the lease is lost
//
// # Ownership
//
// The context returned by [Client.Lock] holds the key, and so does every
// context derived from it: passing it to another goroutine lets that
// goroutine act for the holder, the Go form of "the same thread". Locking
// the same key again with a holding context re-enters: the hold count goes
// up and nothing waits. Any other context contends for the key. Each
// [UnlockFunc] releases one hold level, and the levels entered through it
// (unlock in reverse order, as defer does); the key is deleted when no
// level is left.
//
// # Leases and loss
//
// A lock lives in Redis for a lease (30 s by default) that one watchdog
// goroutine per [Client] renews every third of it, in batches. The holder
// tracks the lease's validity with its monotonic clock; when Redis reports
// the key gone, or no renewal is confirmed before the validity ends, the
// lock context is cancelled with cause [ErrLost], before Redis could hand
// the key to anyone else. Check [context.Cause] to tell a lost lock from a
// cancelled request. If the caller's context ends, renewal stops and the
// lease lapses within one lease time, so a forgotten unlock never holds a
// key forever.
//
// # Waiting
//
// Waiters do not poll: they sleep until the lock is handed to them over
// Redis pub/sub (sharded pub/sub on Redis Cluster; one message to the
// waiter's Client, however many Clients wait, none when the releasing
// Client is the waiter's own) or the holder's lease would end, whichever
// comes first. Waiters queue in Redis, across all
// Clients and processes, and get a released lock first come, first served:
// the release script hands the lock to the next waiter, which starts
// without another Redis call. The lock is handed over for a claim window of
// 1 s, and the new holder's watchdog renews it to its lease well before
// that. A waiter that gives up leaves the queue (passing on a lock it was
// handed); one whose process died lets the handed lock lapse after the
// window and is dropped with every other waiter of its Client, and the
// next turn is open to any queued waiter after a tenth of the window, so
// dead processes hold up a free key about one window in all. Quorum mode
// ([NewQuorum]) has no such queue.
//
// # Semaphores and read-write locks
//
// [Client.Acquire] takes one of limit permits of a key: at most limit
// holders at once across every Client. [Client.RLock] takes a key shared:
// readers hold it together, and a [Client.Lock] of the same key is its
// writer, alone. Each permit and read hold is a lease with the watchdog, a
// fencing token and a context cancelled with cause [ErrLost], as a lock
// is; waiters queue first come, first served, and sleep until handed
// room. A writer in the queue holds up the readers after it, so readers
// do not starve it, and the readers behind it go in together when it
// leaves. A key is a lock, a semaphore (of one limit) or a read-write lock
// while Redis keeps it: a call of another kind or limit gets an error
// wrapping [ErrInvalid]. Quorum mode has neither.
//
// # Deadlines and Close
//
// Lock, TryLock and an [UnlockFunc] return within their context's deadline
// plus 100 ms even when Redis stalls; [WithMaxWait] bounds an acquisition,
// Redis calls included. What a call cut off that way still owes Redis
// (leaving the queue, releasing a key a late command took) is done in the
// background until Redis confirms it. [Client.Close] returns within 1 s.
//
// # Fencing tokens
//
// Every new acquisition of a key gets a number larger than all before it
// ([FencingToken]). Pass it to storage that rejects writes carrying a
// smaller token than it has seen, and a holder that was paused past its
// lease can do no harm. While the lock's hash exists a token is the last
// one plus one; when it is gone (a lapsed lease, data lost in a flush or a
// restart) it is Redis's clock in microseconds. So tokens need no state
// kept forever and grow as long as Redis's clock does not go back and
// Redis does not bring back an older copy of the hash (a failover to a
// lagging replica; see docs/guarantees.md).
//
// # Operating locks
//
// Each owner written to Redis names its process: host name, process id
// and the label of [WithOwnerLabel] ([Owner]). [Client.Inspect] reads a
// lock (holder, hold count, remaining lease, token, wait queue);
// [Client.List] lists held locks by pattern with SCAN; [Client.ForceUnlock]
// ends a stuck holder's hold, fenced: the next token is larger and the old
// holder's watchdog reports [ErrLost] at its next renewal. The lockkit
// command (cmd/lockkit) does the same from a shell, and package locktest
// helps test code that takes locks.
//
// # Redis data
//
// For key K and prefix P (default "lockkit") the Client uses the hash
// P:{K} (owner, hold count, last fencing token and last releasing owner,
// with the lease as TTL, kept free for at most a second after a release),
// while someone waits the list P:{K}:queue and the hash P:{K}:waits (the
// wait queue, expiring with its latest waiter), and the channel
// P:{K}:released, where braces and '%' in K are escaped and keys over 128
// bytes are replaced by their SHA-256 digest. All share one hash tag, so
// locks work unchanged on Redis Cluster. Every key has a TTL. A
// semaphore's or read-write lock's hash holds its kind and one field per
// holder with that holder's lease end, instead of the owner and count.
package lock
