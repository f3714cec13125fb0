package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/health"
	"github.com/lockkit/lockkit/lock/internal/janitor"
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
	return newClient(nodes, opts, newQuorum)
}

// quorum is the backend of [NewQuorum]: independent masters, a lock held
// when a majority of them confirms it, without a wait queue or fencing
// tokens.
type quorum struct {
	c   *Client
	set nodeSet
}

func newQuorum(c *Client, nodes []*node) backend {
	for _, nd := range nodes {
		nd.claimArg = int64(0) // no queue
		nd.health = &health.Tracker{}
	}
	return &quorum{c: c, set: nodeSet{nodes: nodes, need: len(nodes)/2 + 1, tasks: c.tasks}}
}

func (q *quorum) nodes() *nodeSet { return &q.set }

// timeout is the node timeout (see [WithNodeTimeout]), so that silent
// nodes do not hold back the majority's answer.
func (q *quorum) timeout(lease time.Duration) time.Duration {
	return q.c.cfg.nodeTimeoutFor(lease)
}

func (q *quorum) acquire(ctx context.Context, nd *node, h *hold, n int, wait bool) ([]int64, error) {
	v, err := nd.acquire(ctx, h, n, wait)
	if err == nil && n == 1 && v[0] == 1 {
		q.lateGrant(ctx, nd, h)
	}
	return v, err
}

// lateGrant releases the key on nd, which just gave it to h's owner, when
// the owner's final release was already under way: a call returns at the
// majority's answer and the other nodes' commands go on in the
// background, so the release, sent on another connection, may have
// reached nd first; nd would then keep the key for a whole lease, for an
// owner long gone, and with two such nodes no one could get a majority.
func (q *quorum) lateGrant(ctx context.Context, nd *node, h *hold) {
	if h.releasing.Load() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		_, _ = nd.release(rctx, h, 0, nil)
	}
}

// token is 0: each node counts on its own, and a majority's counters need
// not increase across acquisitions that reached different majorities.
func (q *quorum) token(int64) uint64 { return 0 }

// release cuts a node's command off only at ctx's deadline or Close, not
// when the caller returns at the majority's answer: a node slower to
// start would keep the key for a whole lease
// (TestQuorumReleaseReachesSlowNode). A node that does not answer a
// final release (see owe) gets it again from the janitor.
func (q *quorum) release(ctx context.Context, h *hold, n int) votes {
	c := q.c
	rs := fanOutScripts(&q.set, ctx, q.timeout(h.lease), func(ctx context.Context, nd *node) (bool, error) {
		if d, ok := ctx.Deadline(); ok && !c.isClosed() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
			defer cancel()
			defer context.AfterFunc(c.life, cancel)()
		}
		r, err := nd.release(ctx, h, n, nil)
		if n == 0 && err != nil {
			q.owe(h, slices.Index(q.set.nodes, nd), err)
		}
		return r.ok && err == nil, err
	}, isTrue)
	if n == 0 {
		for i, r := range rs {
			if r.err == errNodeDown {
				q.owe(h, i, r.err)
			}
		}
	}
	return tally(rs, isTrue)
}

// owe hands node i's release of h's owner to the janitor when the node
// did not answer it (err) and the release is final: the hold ended, so
// the owner acquires nothing any more. Answered or not, the call returned
// at the majority's answer; a node silent then (frozen, say) runs what it
// was sent when it resumes, in no set order, the owner's cut-off
// acquisition too, and would keep the key for a whole lease: with one
// more node down, no one could get a majority until it lapses. The
// janitor releases the owner there until the node confirmed it twice,
// settle apart (TestQuorumFrozenNodeKeepsNoReleasedKey). A release left
// unanswered by an acquisition that has yet to win (see attempt) is not
// owed: the owner may take the node again; if its call gives up, the
// janitor releases it everywhere.
func (q *quorum) owe(h *hold, i int, err error) {
	if unreachable(err) {
		return
	}
	h.mu.Lock()
	final := h.end != nil
	h.mu.Unlock()
	if final {
		q.c.jan.Owe(h, part(i), time.Now().Add(h.lease))
	}
}

// cleanupNodeTimeout is the least time a cleanup waits for each node
// (see clean): half the janitor's bound on a cleanup. A cleanup returns at
// the majority's answer, so a silent node does not hold it up; under load
// a node timeout of 200 ms failed the janitor's calls to the answering
// nodes too, three in a row had the health tracker skip those nodes for
// a second, and keys of calls cut off stayed blocked that long
// (TestQuorumBurstOfCutOffCallsBlocksKeysAtMostAClaimWindow).
const cleanupNodeTimeout = janitor.CleanupTimeout / 2

// clean releases h's owner, which nobody will use, on the nodes of parts
// (see janitor.Clean). It returns when so many nodes confirmed that, with
// those not asked, a majority did, each node bounded by the node timeout
// or cleanupNodeTimeout, whichever is longer, or when ctx is done; a node
// that did not answer by then (not waited for, silent, or skipped after
// repeated failures) is asked again in the janitor's next round, and the
// janitor's second round asks every node of parts again.
func (q *quorum) clean(ctx context.Context, h *hold, parts janitor.Parts) (janitor.Parts, bool) {
	h.releasing.Store(true) // a late grant seen from now on is released (see lateGrant)
	var asked []int
	for i := range q.set.nodes {
		if parts&part(i) != 0 {
			asked = append(asked, i)
		}
	}
	set := nodeSet{nodes: make([]*node, len(asked)), tasks: q.set.tasks}
	for j, i := range asked {
		set.nodes[j] = q.set.nodes[i]
	}
	known := len(q.set.nodes) - len(asked) // nodes not asked: they confirmed a release of the owner already
	set.need = max(1, q.set.need-known)
	rs := fanOut(&set, ctx, max(q.timeout(h.lease), cleanupNodeTimeout), func(ctx context.Context, nd *node) (bool, error) {
		_, err := nd.release(ctx, h, 0, nil)
		return true, err
	}, isTrue)
	confirmed := parts
	for j, r := range rs {
		if r.err == nil {
			known++
		} else if !unreachable(r.err) {
			confirmed &^= part(asked[j])
		}
	}
	return confirmed, known >= q.set.need
}

// part is node i's part of a cleanup (see janitor.Parts).
func part(i int) janitor.Parts { return 1 << (i % 64) }

// unreachable reports whether err tells that nothing sent to a node can
// run there any more: no connection could be made (the server is gone,
// and took the commands sent before with it), or the Redis client was
// closed. A silent node, or one that refused with an error reply, still
// owes its answer.
func unreachable(err error) bool {
	var re redis.Error
	return !mayHaveRun(err) && !errors.As(err, &re)
}

// freed wakes this process's first waiter of rk's key, unless its owner
// is except: a release's message wakes the first waiter of every other
// Client, and a Client skips its own messages. Also after a release that
// did not win, as when two Lock calls of this Client split the nodes: each
// lets go of its minority, and neither would try again until the lease it
// last saw ends. Not the releasing owner's own waiter (except), whose
// attempt let go of a minority and tries again when that attempt said.
func (q *quorum) freed(rk redisKeys, except string) {
	q.c.wt.wakeFirst(rk, except)
}

func (q *quorum) queued() bool { return false }

// leave has no queue to leave.
func (q *quorum) leave(context.Context, *hold) bool { return true }

// channel is the key's: with no queue, a release tells every waiter's
// Client alike.
func (q *quorum) channel(rk redisKeys) string { return rk.channel }

// groups is one group: every node gets the whole batch.
func (q *quorum) groups(_ context.Context, batch []*hold) [][]*hold {
	return [][]*hold{batch}
}

// failure tells why no majority answered.
func (q *quorum) failure(v votes) error {
	errs := make([]error, len(v.errs))
	for i, err := range v.errs {
		errs[i] = redisError(err)
	}
	return fmt.Errorf("quorum of %d not reached (%d confirmed, %d gone): %w",
		q.set.need, v.yes, v.no, errors.Join(errs...))
}

// inspected sums up the nodes' answers: the holder a majority has.
func (q *quorum) inspected(key, name string, rs []nodeResult[LockInfo]) (LockInfo, error) {
	info := LockInfo{Key: key, Name: name}
	votes := map[string]int{}
	var errs []error
	for i, r := range rs {
		n := r.val
		n.Key, n.Name, n.Node, n.Err = key, name, nodeAddr(q.set.nodes[i].rdb), r.err
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Node, r.err))
		} else if n.Held {
			votes[n.Holder.ID]++
		}
		info.Nodes = append(info.Nodes, n)
	}
	need := q.set.need
	if len(errs) > len(q.set.nodes)-need {
		return LockInfo{}, fmt.Errorf("lock: inspect %q: fewer than %d nodes answered: %w", key, need, errors.Join(errs...))
	}
	for _, n := range info.Nodes {
		if n.Err != nil || !n.Held || votes[n.Holder.ID] < need {
			continue
		}
		if !info.Held || n.RemainingLease < info.RemainingLease {
			info.Held, info.Holder, info.HoldCount, info.RemainingLease = true, n.Holder, n.HoldCount, n.RemainingLease
		}
	}
	return info, nil
}
