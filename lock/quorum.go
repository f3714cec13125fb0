package lock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewQuorum returns a Client that takes every lock on a majority of
// independent Redis masters, as in the Redlock spec, so that locks survive
// the loss of a minority of them. With N nodes a lock is held when N/2+1
// of them confirm it, within its validity: the lease less the time the
// acquisition took less the clock drift allowance. Each node gets a
// per-node timeout much shorter than the lease (see [WithNodeTimeout]);
// when no majority is reached the Client releases what it took on every
// node and, if waiting, tries again after a random delay or a release
// message from any node. Re-entry, the watchdog (a renewal counts only
// when a majority confirms it within the validity) and pub/sub wake-ups
// work as with [New].
//
// Quorum mode gives no fencing tokens: each node counts on its own, and a
// majority's counters need not increase across acquisitions that reached
// different majorities, so [FencingToken] reports ok=false. Like Redlock it
// relies on bounded clock drift and process pauses; see docs/guarantees.md.
//
// NewQuorum needs at least 3 distinct, non-nil clients of independent
// masters (not replicas of each other and not one cluster); it returns
// [ErrInvalid] otherwise. The options and defaults are those of [New].
// A Redis Cluster client is a valid node; it then counts as one vote.
func NewQuorum(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) < 3 {
		return nil, invalidf("quorum mode needs at least 3 Redis masters, got %d (use New for one)", len(nodes))
	}
	for i, rdb := range nodes {
		if err := checkRedis(rdb); err != nil {
			return nil, fmt.Errorf("%w at index %d", err, i)
		}
		if slices.Index(nodes, rdb) != i {
			return nil, invalidf("the Redis client at index %d is also at index %d", i, slices.Index(nodes, rdb))
		}
	}
	return newClient(nodes, opts)
}

// votes tallies the nodes' answers about one hold.
type votes struct {
	yes  int     // confirmed
	no   int     // the owner's hold was gone
	errs []error // failed or silent nodes
}

func (c *Client) won(v votes) bool { return v.yes >= c.quorum }

// lost reports whether so many nodes no longer have the owner that a
// majority can never confirm it again.
func (c *Client) lost(v votes) bool { return v.no > len(c.nodes)-c.quorum }

// failure is the error of a call that neither won nor was lost: the Redis
// error with one node, or why no majority answered.
func (c *Client) failure(v votes) error {
	if len(c.nodes) == 1 {
		return c.nodes[0].redisError(v.errs[0])
	}
	errs := make([]error, len(v.errs))
	for i, err := range v.errs {
		errs[i] = redisError(err)
	}
	return fmt.Errorf("quorum of %d not reached (%d confirmed, %d gone): %w",
		c.quorum, v.yes, v.no, errors.Join(errs...))
}

// retryDelay is when to try again after an attempt that did not win:
// heldFor are the remaining leases of the nodes held by other owners. It
// is the time until enough of them lapse for a majority to be free; when a
// majority is free already (the vote split between contenders), a short
// random delay so contenders do not meet again in lockstep.
func (c *Client) retryDelay(heldFor []time.Duration, timeout time.Duration) time.Duration {
	need := c.quorum - (len(c.nodes) - len(heldFor))
	if need <= 0 {
		return time.Millisecond + rand.N(2*timeout)
	}
	slices.Sort(heldFor)
	return heldFor[need-1]
}
