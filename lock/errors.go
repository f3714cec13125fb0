package lock

import (
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrNotObtained is returned by [Client.TryLock] when another owner holds
	// the key, and by [Client.Lock] when the wait limit passed or the
	// caller's context ended first. In the latter case the error also
	// matches ctx.Err(). Use [errors.As] with [*NotObtainedError] to read the
	// holder's remaining lease.
	ErrNotObtained = errors.New("lock: not obtained")

	// ErrNotHeld is returned by an [UnlockFunc] that was already called (the
	// second call does not touch Redis), and by [Client.ForceUnlock] when no
	// one holds the key.
	ErrNotHeld = errors.New("lock: not held")

	// ErrLost is the cause of a lock context that was cancelled because its
	// lease ended or could no longer be proven: the lock key was deleted or
	// taken over, Redis did not confirm a renewal before the validity ran
	// out, or a fixed lease expired. An [UnlockFunc] of a lost hold also
	// returns ErrLost.
	ErrLost = errors.New("lock: lease lost")

	// ErrClosed is returned by a [Client] after [Client.Close], and is the
	// cause of the contexts of locks still held when Close was called. The
	// [UnlockFunc] of such a lock returns it too: Close released the key.
	ErrClosed = errors.New("lock: client closed")

	// ErrInvalid is wrapped by every error about a bad argument: an empty or
	// oversized key, a nil Redis client, a lease or wait that is zero,
	// negative or too short.
	ErrInvalid = errors.New("lock: invalid argument")

	// ErrOutOfMemory is wrapped by the error of a call Redis refused
	// because it reached its maxmemory and could free nothing (an OOM
	// error: the noeviction policy, or an eviction policy that found
	// nothing left to evict; the error names the maxmemory-policy read at
	// [New]): no new lock can be taken until memory is freed. Renewals and
	// final releases still work on a full Redis (they write nothing new
	// before they free), so held locks are not lost to it.
	ErrOutOfMemory = errors.New("lock: Redis is out of memory")

	// ErrReplicaAck is wrapped by the error of an acquisition whose write
	// fewer replicas confirmed than [WithReplicaAck] asks for, in its
	// timeout.
	ErrReplicaAck = errors.New("lock: replicas did not confirm the write")
)

// redisError returns err, wrapping [ErrOutOfMemory] when Redis refused the
// command for lack of memory.
func redisError(err error) error { return oomError(err, "") }

// redisError is redisError naming nd's maxmemory-policy, if known (see
// checkEviction).
func (nd *node) redisError(err error) error {
	policy := ""
	if p := nd.policy.Load(); p != nil {
		policy = *p
	}
	return oomError(err, policy)
}

// oomError wraps [ErrOutOfMemory] around an OOM error of Redis, naming
// policy when it is known.
func oomError(err error, policy string) error {
	switch {
	case !redis.HasErrorPrefix(err, "OOM"):
		return err
	case policy == "":
		return fmt.Errorf("%w (maxmemory reached): %w", ErrOutOfMemory, err)
	case policy == noEviction:
		return fmt.Errorf("%w (maxmemory reached, maxmemory-policy noeviction): %w", ErrOutOfMemory, err)
	}
	return fmt.Errorf("%w (maxmemory reached, nothing left to evict under maxmemory-policy %s): %w", ErrOutOfMemory, policy, err)
}

// NotObtainedError tells why a lock was not obtained. It matches
// [ErrNotObtained] with [errors.Is].
type NotObtainedError struct {
	// Key is the key that was asked for.
	Key string
	// RemainingLease is how long the last attempt was told the key stays
	// taken: the holder's remaining lease as Redis reported it, or, while a
	// released key is kept for a queued waiter, the time left of its turn
	// (at most 1 s). It is 0 when not known.
	RemainingLease time.Duration
	// Reserved is set when the key was free but kept for the turn of a
	// queued [Client.Lock] caller: waiters are served first come, first
	// served, so TryLock does not get a key in steady Lock demand.
	Reserved bool

	timedOut   bool // Lock's wait limit passed
	unanswered bool // a deadline passed while Redis did not answer a call
}

func (e *NotObtainedError) Error() string {
	state, ends := "is held", "lease ends"
	if e.Reserved {
		state, ends = "is free but reserved for a queued waiter's turn", "turn ends"
	}
	switch {
	case e.RemainingLease > 0:
		return fmt.Sprintf("lock: not obtained: %q %s (%s in %v)", e.Key, state, ends, e.RemainingLease)
	case e.unanswered:
		return fmt.Sprintf("lock: not obtained: %q: Redis did not answer in time", e.Key)
	case e.timedOut:
		return fmt.Sprintf("lock: not obtained: %q: wait limit passed", e.Key)
	}
	return fmt.Sprintf("lock: not obtained: %q", e.Key) // no answer from Redis yet
}

// Is reports whether target is [ErrNotObtained].
func (e *NotObtainedError) Is(target error) bool { return target == ErrNotObtained }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
