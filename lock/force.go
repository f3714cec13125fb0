package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// Forced tells what [Client.ForceUnlock] did.
type Forced struct {
	// Holder is the owner whose hold was ended (in quorum mode, the one
	// that held most of the nodes), and Token its fencing token (0 in
	// quorum mode).
	Holder Owner
	Token  uint64
	// HandedTo is the queued waiter the lock went to, with NewToken, when
	// one was waiting (HandedTo.ID is empty otherwise).
	HandedTo Owner
	NewToken uint64
	// Permits are the holds ended of a semaphore or read-write lock,
	// oldest token first: Holder and Token are the first's. HandedTo is
	// then empty: the freed room goes to the waiters as a release's does
	// (see [Client.Acquire]), each told by a message.
	Permits []Permit
}

// forceLinger is how long the hash of a lock freed by ForceUnlock stays,
// keeping its last token.
const forceLinger = 1000 // ms

// ErrHolderChanged is returned by [Client.ForceUnlock] with [IfHeldBy]
// when another owner than the one named holds the key: nothing was
// ended.
var ErrHolderChanged = errors.New("lock: held by another owner")

// A ForceOption changes what [Client.ForceUnlock] does.
type ForceOption func(*forceConfig)

type forceConfig struct {
	holder      string // end the hold only if this owner ID has it
	conditional bool   // IfHeldBy was given
}

// IfHeldBy makes [Client.ForceUnlock] end the hold only while owner (an
// [Owner]'s ID, as [Client.Inspect] reports it) holds the key, checked
// in the same atomic step that ends it. An operator who decided from
// Inspect that a holder is stuck ends that holder, not whichever one
// took the key since (after its release, or another operator's
// force-unlock). An empty owner is an error wrapping [ErrInvalid].
// Default: end any holder.
func IfHeldBy(owner string) ForceOption {
	return func(fc *forceConfig) { fc.holder, fc.conditional = owner, true }
}

// ForceUnlock ends the current hold of key, whoever holds it (or, with
// [IfHeldBy], only the owner named), for an operator who decided its
// holder is stuck: the lock goes to the first live queued waiter as a
// release would hand it over, or is free. A hand-off is told to every
// Client with a queued waiter, so a waiter that never takes the key (its
// process is frozen or dead) holds the others up one claim window (1 s)
// at most, even when this Client is closed right after ForceUnlock.
//
// The old holder cannot do harm afterwards: its watchdog finds the owner
// gone at its next renewal (within a third of its lease) and cancels its
// lock context with cause [ErrLost]; its re-entries and its unlock return
// ErrLost; and the next fencing token of key (the waiter's, or that of
// the next acquisition) is larger than the old holder's, so storage that
// checks tokens rejects its late writes. Until its next renewal the old
// holder may still believe it holds the key: that is what fencing tokens
// are for. A hold taken with [WithFixedLease] (package cronlock's run and
// tick locks, for instance) has no watchdog: it learns of ForceUnlock
// only at its unlock, which returns ErrLost, or when its fixed lease
// ends; until then its lock context runs on, and only its fencing token,
// smaller than the next holder's, stops its writes. When the old holder
// is this Client's, its hold ends with ErrLost before ForceUnlock returns
// (package locktest's Lose uses this).
//
// A semaphore or a read-write lock has several holders: ForceUnlock ends
// the hold of every one whose lease has not ended or, with [IfHeldBy],
// that of the owner named alone (ErrHolderChanged when it holds none,
// even if others do). Each hold ends as its release would, all in one
// MULTI transaction: the freed permits and the key go to the waiters at
// the front of the queue, and the rules above for the old holders hold
// for each. [LockInfo].LastReleasedBy names the forcing Client then too.
// Redis Cluster runs the transaction on the key's master.
//
// Like [Client.Inspect], ForceUnlock takes the Name [Client.List] lists
// for a key stored by its digest in place of that key.
//
// Errors: [ErrNotHeld] when no one holds key (nothing changes; a lock
// taken with another prefix is not seen), [ErrHolderChanged] when
// [IfHeldBy] names another owner than the holder (nothing changes),
// [ErrInvalid] for an empty or oversized key, [ErrClosed] after Close, or
// the Redis error. ForceUnlock returns within ctx's deadline; a command
// still under way then goes on in the background.
//
// In quorum mode the hold is ended on every node that answers (each
// bounded by the node timeout). ForceUnlock succeeds when afterwards a
// majority of nodes have no holder: the hold was ended on at least one
// and the others of that majority had none. Otherwise it returns an
// error that tells on how many nodes the hold was ended, and the holder
// may keep the key: what was ended stays ended (a holder that lost its
// majority loses the key at its next renewal), and a new ForceUnlock
// once the nodes answer ends the rest. ErrNotHeld then means no node
// that answered had a holder.
func (c *Client) ForceUnlock(ctx context.Context, key string, opts ...ForceOption) (Forced, error) {
	rk, err := c.operate(key)
	if err != nil {
		return Forced{}, err
	}
	var fc forceConfig
	for _, o := range opts {
		o(&fc)
	}
	if fc.conditional && fc.holder == "" {
		return Forced{}, invalidf("IfHeldBy with an empty owner")
	}
	var from any = c.newOwner(false) // an owner of its own: r names it
	set := c.be.nodes()
	rs := fanOutScripts(set, ctx, c.be.timeout(c.cfg.lease), func(ctx context.Context, nd *node) ([]any, error) {
		return nd.run(ctx, scripts.Force, rk, from, nd.claimArg, nd.publish, forceLinger, fc.holder).Slice()
	}, nil)
	var f Forced
	var errs []error
	ended, free := 0, 0         // nodes where the hold was ended, where none was
	var other Owner             // the holder IfHeldBy did not name
	holders := map[string]int{} // the owners whose hold was ended, with their nodes
	for _, r := range rs {
		switch {
		case r.err == nil && len(rs) == 1 && len(r.val) >= 2 && r.val[0] == int64(3):
			return c.forceShared(ctx, set.nodes[0], key, rk, from, fc, r.val)
		case r.err != nil:
			errs = append(errs, redisError(r.err))
		case len(r.val) >= 3 && r.val[0] == int64(1):
			ended++
			holder := replyStr(r.val[1])
			holders[holder]++
			if holders[holder] > holders[f.Holder.ID] { // in quorum mode: the holder of most nodes
				f.Holder = ParseOwner(holder)
			}
			f.Token = c.be.token(replyInt(r.val[2]))
			if len(r.val) == 5 {
				f.HandedTo, f.NewToken = ParseOwner(replyStr(r.val[3])), uint64(replyInt(r.val[4]))
			}
		case len(r.val) >= 2 && r.val[0] == int64(2):
			other = ParseOwner(replyStr(r.val[1]))
		default:
			free++
		}
	}
	switch {
	case ended > 0 && ended+free >= set.need:
		for holder := range holders {
			c.endOwn(holder)
		}
		c.be.freed(rk, "") // where no message tells them, this process's waiters try at once
		return f, nil
	case ended > 0:
		return Forced{}, fmt.Errorf("lock: force-unlock %q: the hold was ended on %d of %d nodes and %d had none, fewer than the %d needed: the holder may keep the key (%w)",
			key, ended, len(set.nodes), free, set.need, errors.Join(errs...))
	case other.ID != "":
		return Forced{}, fmt.Errorf("lock: force-unlock %q: %w: %s holds it, not %s", key, ErrHolderChanged, other.ID, fc.holder)
	case len(errs) > 0:
		return Forced{}, fmt.Errorf("lock: force-unlock %q: %w", key, errors.Join(errs...))
	}
	return Forced{}, fmt.Errorf("lock: force-unlock %q: %w: no one holds it (under prefix %q)", key, ErrNotHeld, c.cfg.prefix)
}

// endOwn ends at once this Client's hold of owner, which ForceUnlock
// took away in Redis: there is no need to wait for its next renewal.
func (c *Client) endOwn(owner string) {
	if !c.ownedBy(owner) {
		return
	}
	c.wd.mu.Lock()
	var found *hold
	for h := range c.wd.holds {
		if h.owner == owner {
			found = h
			break
		}
	}
	c.wd.mu.Unlock()
	if found != nil {
		found.mu.Lock()
		found.endLocked(ErrLost)
		found.mu.Unlock()
	}
}

// forceShared ends holds of a semaphore or read-write lock on nd, whose
// live holders force.lua listed in v ({3, Redis's time, owner, field
// value, ...}): every one's, or only fc's holder's. It runs share.lua's
// release of each (to hold count 0), then force.lua's naming of from, in
// one MULTI, so nothing comes between them.
func (c *Client) forceShared(ctx context.Context, nd *node, key string, rk redisKeys, from any, fc forceConfig, v []any) (Forced, error) {
	now := replyInt(v[1])
	var ps []Permit
	var kinds []any // share.lua's kind argument of each, its field's first letter
	for i := 2; i+1 < len(v); i += 2 {
		owner, field := replyStr(v[i]), replyStr(v[i+1])
		p, err := parsePermit(now, owner, field)
		if err != nil {
			return Forced{}, fmt.Errorf("lock: force-unlock %q: %w", key, err)
		}
		if !fc.conditional || owner == fc.holder {
			ps = append(ps, p)
			kinds = append(kinds, field[:1])
		}
	}
	switch held := (len(v) - 2) / 2; {
	case held == 0:
		return Forced{}, fmt.Errorf("lock: force-unlock %q: %w: no one holds it (under prefix %q)", key, ErrNotHeld, c.cfg.prefix)
	case len(ps) == 0:
		return Forced{}, fmt.Errorf("lock: force-unlock %q: %w: %d others hold it, not %s", key, ErrHolderChanged, held, fc.holder)
	}
	ended, err := nd.endShared(ctx, c, rk, from, ps, kinds)
	if err != nil {
		return Forced{}, fmt.Errorf("lock: force-unlock %q: %w", key, redisError(err))
	}
	var f Forced
	for i, p := range ps {
		if ended[i] {
			f.Permits = append(f.Permits, p)
			c.endOwn(p.Owner.ID)
		}
	}
	if len(f.Permits) == 0 {
		return Forced{}, fmt.Errorf("lock: force-unlock %q: %w: its holders left meanwhile", key, ErrNotHeld)
	}
	slices.SortFunc(f.Permits, func(a, b Permit) int { return cmp.Compare(a.Token, b.Token) })
	f.Holder, f.Token = f.Permits[0].Owner, f.Permits[0].Token
	c.be.freed(rk, "")
	return f, nil
}

// endShared runs, in one MULTI on nd, share.lua's release of each holder
// of ps (kinds: its kind argument) and force.lua's naming of from as the
// last releaser, and reports which releases ended a hold. With
// WithReplicaAck it waits for the replicas after EXEC on the same
// connection. It returns within ctx's deadline (see Client.within).
func (nd *node) endShared(ctx context.Context, c *Client, rk redisKeys, from any, ps []Permit, kinds []any) ([]bool, error) {
	keys := rk.keys()
	ended := make([]bool, len(ps))
	err := c.within(ctx, func(ctx context.Context) error {
		// EVALSHA in a MULTI fails at EXEC, after the others ran, when
		// Redis does not know the script: load it first.
		if err := scripts.Share.Load(ctx, nd.rdb).Err(); err != nil {
			return err
		}
		var tx redis.Cmdable = nd.rdb
		if cl, ok := nd.rdb.(*redis.Client); ok && nd.acks > 0 {
			conn := cl.Conn()
			defer conn.Close()
			tx = conn
		}
		mark := []any{from, nd.claimArg, nd.publish, forceLinger, "", "r"}
		cmds := make([]*redis.Cmd, len(ps))
		_, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			for i, p := range ps {
				mark = append(mark, p.Owner.ID)
				cmds[i] = scripts.Share.EvalSha(ctx, pipe, keys, p.Owner.ID, opRelease, kinds[i], 0, forceLinger, 0, nd.claimArg, 0, nd.publish, forceLinger)
			}
			scripts.Force.EvalSha(ctx, pipe, keys, mark...)
			return nil
		})
		if err != nil {
			return err
		}
		for i, cmd := range cmds {
			v, _ := cmd.Int64Slice()
			ended[i] = len(v) == 1 && v[0] == 1
		}
		if conn, ok := tx.(*redis.Conn); ok {
			if n, err := conn.Wait(ctx, nd.acks, nd.ackTimeout).Result(); err != nil || n < int64(nd.acks) {
				return fmt.Errorf("%w: %d of %d replicas within %v (%v)", ErrReplicaAck, n, nd.acks, nd.ackTimeout, err)
			}
		}
		return nil
	})
	return ended, err
}
