package lock

import (
	"context"
	"time"
)

// A backend keeps a Client's locks in Redis. [New] makes a single
// backend: one deployment (a server, Sentinel, a Redis Cluster), whose
// wait queue hands a released key to the next waiter, with fencing
// tokens. [NewQuorum] makes a quorum backend: independent masters, a lock
// held when a majority confirms it, without a queue or tokens. The holds,
// their levels, the waiting, renewal, cleanup and Close are shared and
// reach Redis through the backend and its nodes.
type backend interface {
	// nodes returns the nodes a lock is written to, and how many of them
	// must confirm a call.
	nodes() *nodeSet

	// timeout bounds each node's answer to a call about a lock with this
	// lease; 0 leaves it to the Redis client's own timeouts.
	timeout(lease time.Duration) time.Duration

	// acquire runs acquire.lua on nd for h's owner at hold count n (see
	// node.acquire): an attempt (n 1, joining the wait queue with wait) or
	// a re-entry.
	acquire(ctx context.Context, nd *node, h *hold, n int, wait bool) ([]int64, error)

	// token is the fencing token of an acquisition that a node answered
	// with tok: 0 where the backend gives none.
	token(tok int64) uint64

	// release moves h's owner to hold count n on every node, deleting the
	// key at 0, and tallies the answers. It waits for Redis until ctx is
	// done.
	release(ctx context.Context, h *hold, n int) votes

	// freed tells this process's first waiter of rk's key, unless its
	// owner is except, that this Client let go of the key, where no
	// message or reply of Redis's tells it.
	freed(rk redisKeys, except string)

	// queued reports whether Redis keeps each key's wait queue. With one,
	// a waiter is handed the key or given its turn and tries when woken,
	// and one that stops waiting leaves the queue in Redis. Without one,
	// this process's waiters of a key take turns: only the first tries
	// unless woken for a hand-off, and when it leaves the next tries in its
	// place, so that a release does not send every local waiter at Redis
	// at once.
	queued() bool

	// leave takes h's owner out of its key's wait queue in Redis, passing
	// on a turn it had, and reports whether Redis confirmed it (true
	// without a queue).
	leave(ctx context.Context, h *hold) bool

	// channel is the pub/sub channel this Client's waiters of rk's key
	// listen on.
	channel(rk redisKeys) string

	// groups splits a renewal batch by the Redis server that serves each
	// lease, so that a server down or stuck delays only its own.
	groups(ctx context.Context, batch []*hold) [][]*hold

	// failure is the error of a call that neither won nor was lost.
	failure(v votes) error

	// inspected sums up the nodes' answers to an Inspect of key, whose
	// lock hash is name.
	inspected(key, name string, rs []nodeResult[LockInfo]) (LockInfo, error)
}
