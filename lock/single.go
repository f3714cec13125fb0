package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/pipe"
)

// single is the backend of [New]: one Redis deployment, whose wait queue
// (see queue.lua) hands a released key to its next waiter, and whose
// token counter gives fencing tokens.
type single struct {
	c    *Client
	nd   *node
	set  nodeSet
	then replied // s.releaseReplied, made once
}

func newSingle(c *Client, nodes []*node) backend {
	nd := nodes[0]
	nd.claimArg = claimWindow.Milliseconds()
	s := &single{c: c, nd: nd, set: nodeSet{nodes: nodes, need: 1, tasks: c.tasks}}
	if !nd.sharded && nd.acks == 0 {
		nd.pipe = pipe.New[*hold](nd.rdb, c.tasks, c.life)
		s.set.inline = nd
	}
	s.then = s.releaseReplied
	return s
}

func (s *single) nodes() *nodeSet { return &s.set }

// timeout is 0: the Redis client's own timeouts bound the one node.
func (s *single) timeout(time.Duration) time.Duration { return 0 }

func (s *single) acquire(ctx context.Context, nd *node, h *hold, n int, wait bool) ([]int64, error) {
	return nd.acquire(ctx, h, n, wait)
}

func (s *single) token(tok int64) uint64 { return uint64(tok) }

// release acts on the reply of a final release as soon as it comes (see
// releaseReplied).
func (s *single) release(ctx context.Context, h *hold, n int) votes {
	var then replied
	if n == 0 {
		then = s.then
	}
	var room [1]nodeResult[bool]
	rs := fanOutWith(&s.set, ctx, 0, releaseOn, releaseArgs{h, n, then}, isTrue, room[:])
	return tally(rs, isTrue)
}

// releaseArgs are those of a release on each node (see releaseOn).
type releaseArgs struct {
	h    *hold
	n    int
	then replied
}

// releaseOn releases a.h's owner to hold count a.n on nd, with a.then on
// the reply, and reports whether the owner's count is at a.n.
func releaseOn(ctx context.Context, nd *node, a releaseArgs) (bool, error) {
	r, err := nd.release(ctx, a.h, a.n, a.then)
	return r.ok && err == nil, err
}

// releaseReplied acts on the reply of a final release as soon as it comes
// (see replied): it has a hand-off to another Client's waiter checked
// after the claim window, before the releasing caller could close the
// Client, and returns the wake channel of this process's waiter the key
// was handed to, which no message tells; when the release failed (it may
// have run, its reply lost), that of this process's first waiter of the
// key, which tries (see release.lua).
func (s *single) releaseReplied(h *hold, cmd *redis.Cmd) chan struct{} {
	wt := s.c.wt
	r, err := parseReleased(cmd)
	switch {
	case r.ok: // it ran (with an error: too few replicas confirmed it)
		if r.next.owner != "" && !s.c.ownedBy(r.next.owner) {
			wt.checkLater(s.nd, h)
		}
		return wt.toWake(h.rk, r.next)
	case err != nil:
		return wt.toWake(h.rk, handOff{})
	}
	return nil
}

// freed does nothing: a release's reply wakes the waiter it handed the
// key to or gave the turn (see releaseReplied), and the messages of a
// release name the waiter, this Client's as well as others'.
func (s *single) freed(redisKeys, string) {}

func (s *single) queued() bool { return true }

func (s *single) leave(ctx context.Context, h *hold) bool {
	rs := fanOutScripts(&s.set, ctx, 0, func(ctx context.Context, nd *node) (struct{}, error) {
		return struct{}{}, nd.leave(ctx, h)
	}, nil)
	return rs[0].err == nil
}

// channel is this Client's own: a release tells each Client of its
// waiters' hand-offs and turns (see queue.lua).
func (s *single) channel(rk redisKeys) string { return rk.channel + ":" + s.c.id }

// groups splits batch by master on Redis Cluster; elsewhere it is one
// group.
func (s *single) groups(ctx context.Context, batch []*hold) [][]*hold {
	cc, ok := s.nd.rdb.(*redis.ClusterClient)
	if !ok {
		return [][]*hold{batch}
	}
	by := make(map[string][]*hold)
	var order []string
	for _, h := range batch {
		addr := "" // unknown: one group of its own
		if m, err := cc.MasterForKey(ctx, h.rk.lock); err == nil {
			addr = m.Options().Addr
		}
		if by[addr] == nil {
			order = append(order, addr)
		}
		by[addr] = append(by[addr], h)
	}
	groups := make([][]*hold, len(order))
	for i, addr := range order {
		groups[i] = by[addr]
	}
	return groups
}

// failure is the node's Redis error.
func (s *single) failure(v votes) error { return s.nd.redisError(v.errs[0]) }

// inspected is the node's answer, with key as its Key unless key is the
// Name of a lock stored by its digest.
func (s *single) inspected(key, _ string, rs []nodeResult[LockInfo]) (LockInfo, error) {
	if rs[0].err != nil {
		return LockInfo{}, fmt.Errorf("lock: inspect %q: %w", key, redisError(rs[0].err))
	}
	info := rs[0].val
	if _, byName := s.c.digestTag(key); !byName {
		info.Key = key
	}
	return info, nil
}

func isTrue(ok bool) bool { return ok }
