package lock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// MaxListedWaiters is how many waiters from the front of a lock's queue
// [Client.Inspect] and [Client.List] return (LockInfo.Waiters).
const MaxListedWaiters = 10

// LockInfo is what Redis holds about one lock, read in one atomic step.
type LockInfo struct {
	// Key is the lock's key. [Client.List] leaves it empty for a key
	// stored by its digest (escaped, longer than 128 bytes), and so does
	// [Client.Inspect] of such a lock by its Name: Name then tells which.
	Key string
	// Name is the lock's hash in Redis, e.g. "lockkit:{orders:42}".
	Name string
	// Node is the address of the Redis server the lock was read from, in
	// quorum mode and when [Client.List] lists a Redis Cluster's masters.
	Node string

	// Held tells that an owner holds the lock: Holder, with HoldCount
	// levels, for RemainingLease more (the key's TTL in Redis).
	Held           bool
	Holder         Owner
	HoldCount      int
	RemainingLease time.Duration
	// Token is the last fencing token handed out: the holder's while Held.
	// 0 when Redis keeps none (the lock's hash lapsed).
	Token uint64

	// LastReleasedBy is the owner of the last full release of the lock,
	// while Redis keeps it (about a second after the release); Forced
	// tells that it was a [Client.ForceUnlock], and LastReleasedBy is then
	// the forcing Client's.
	LastReleasedBy Owner
	Forced         bool

	// Reserved tells that the lock is free but kept for the turn of a
	// queued waiter, ReservedFor, for TurnLeft more: [Client.TryLock]
	// is refused meanwhile.
	Reserved    bool
	ReservedFor Owner
	TurnLeft    time.Duration

	// Waiting is the length of the wait queue; Waiters its first
	// [MaxListedWaiters] entries, first come first. A waiter the lock was
	// handed to stays first in the queue in Redis until it confirms (see
	// the package documentation); it is the Holder, and counted in neither.
	Waiting int
	Waiters []Waiter

	// Nodes is, in quorum mode, what each node holds ([Client.Inspect]);
	// the fields above are then those of the holder on a majority of them.
	Nodes []LockInfo
	// Err is, in Nodes, why that node's state is unknown.
	Err error
}

// Waiter is one queued [Client.Lock] call.
type Waiter struct {
	Owner Owner
	// Waited is how long it has been in the queue, by Redis's clock.
	Waited time.Duration
}

// Inspect returns what Redis holds about the lock of key: its holder and
// hold count, remaining lease, last fencing token, wait queue, and whether
// it is free but kept for a queued waiter's turn. It reads with one
// script call per node and changes nothing.
//
// In quorum mode every node is read (each bounded by the node timeout):
// Nodes has one entry per node, and the other fields are those of a holder
// that a majority of nodes have (its smallest remaining lease); Token is
// 0, as quorum mode has no fencing tokens.
//
// A key stored by its digest (longer than 128 bytes once escaped) can be
// named by its Name, as [Client.List] lists it ("<prefix>:{%h<digest>}"):
// Inspect then reads that lock and leaves Key empty, and
// [Client.ForceUnlock] takes that name too. (A key that is itself such a
// name can therefore not be inspected or forced by these two calls.)
//
// Inspect returns within ctx's deadline; it returns an error wrapping
// [ErrInvalid] for an empty or oversized key, [ErrClosed] after Close,
// or the Redis error (in quorum mode: when fewer than a majority of nodes
// answered).
func (c *Client) Inspect(ctx context.Context, key string) (LockInfo, error) {
	rk, err := c.operate(key)
	if err != nil {
		return LockInfo{}, err
	}
	rs := fanOut(c.be.nodes(), ctx, c.be.timeout(c.cfg.lease), func(ctx context.Context, nd *node) (LockInfo, error) {
		return inspectOne(ctx, nd.rdb, rk.keys()[:3])
	}, nil)
	return c.be.inspected(key, rk.lock, rs)
}

// operate checks a call of an operator's (Inspect, ForceUnlock) about key
// and returns the key's Redis names. A key that is the Name of a lock of
// c's prefix stored by its digest names that lock.
func (c *Client) operate(key string) (redisKeys, error) {
	if err := checkKey(key); err != nil {
		return redisKeys{}, err
	}
	if c.isClosed() {
		return redisKeys{}, ErrClosed
	}
	if tag, ok := c.digestTag(key); ok {
		return tagKeys(c.cfg.prefix, tag), nil
	}
	return newRedisKeys(c.cfg.prefix, key), nil
}

// digestTag returns the hash tag of name when it is the Name of a lock of
// c's prefix stored by its digest ("<prefix>:{%h<64 hex digits>}").
func (c *Client) digestTag(name string) (string, bool) {
	tag, ok := strings.CutPrefix(name, c.cfg.prefix+":{%h")
	if !ok {
		return "", false
	}
	digest, ok := strings.CutSuffix(tag, "}")
	if _, err := hex.DecodeString(digest); !ok || err != nil || len(digest) != 2*sha256.Size || strings.ToLower(digest) != digest {
		return "", false
	}
	return "%h" + digest, true
}

// inspectOne reads one lock from rdb: keys are its hash, queue and waits.
func inspectOne(ctx context.Context, rdb redis.Scripter, keys []string) (LockInfo, error) {
	v, err := scripts.Inspect.Run(ctx, rdb, keys, MaxListedWaiters).Slice()
	if err != nil {
		return LockInfo{}, err
	}
	return parseInspect(keys[0], v)
}

// parseInspect reads inspect.lua's reply about the lock hash name.
func parseInspect(name string, v []any) (LockInfo, error) {
	if len(v) < 9 || (len(v)-9)%3 != 0 {
		return LockInfo{}, fmt.Errorf("unexpected reply %v", v)
	}
	num, str := replyInt, replyStr
	ms := func(n int64) time.Duration { return time.Duration(max(n, 0)) * time.Millisecond }
	now, pttl := num(v[0]), num(v[1])
	info := LockInfo{
		Name:      name,
		HoldCount: int(num(v[3])),
		Token:     uint64(num(v[4])),
		Waiting:   int(num(v[8])),
	}
	if r := str(v[5]); r != "" {
		forcer, forced := strings.CutPrefix(r, "!")
		info.LastReleasedBy, info.Forced = ParseOwner(forcer), forced
	}
	if info.HoldCount > 0 {
		info.Held, info.Holder, info.RemainingLease = true, ParseOwner(str(v[2])), ms(pttl)
	}
	openUntil := num(v[7])
	dead := map[string]bool{} // Clients whose waiter at the front missed its turn
	for i := 9; i < len(v); i += 3 {
		if info.Held && str(v[i]) == info.Holder.ID {
			info.Waiting-- // handed the lock, not confirmed yet
			continue
		}
		w := Waiter{Owner: ParseOwner(str(v[i]))}
		if joined := num(v[i+2]); joined > 0 {
			w.Waited = ms(now - joined)
		}
		info.Waiters = append(info.Waiters, w)
		if info.Held || info.Reserved {
			continue
		}
		// The first waiter whose deadline has not passed, and whose Client
		// has no waiter before it that missed its turn, has the turn of a
		// free lock with a queue (see queue.lua's first).
		client, _, _ := cutLast(w.Owner.ID, ":")
		deadline := num(v[i+1])
		if deadline <= now || dead[client] {
			dead[client] = true
			continue
		}
		info.Reserved, info.ReservedFor, info.TurnLeft = true, w.Owner, ms(deadline-now)
		if openUntil > now {
			info.TurnLeft = ms(openUntil - now)
		}
	}
	return info, nil
}

// replyInt reads an integer of a script's reply, given as a number or a
// string (a hash field); anything else is 0.
func replyInt(x any) int64 {
	switch x := x.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// replyStr reads a string of a script's reply; anything else is "".
func replyStr(x any) string {
	s, _ := x.(string)
	return s
}

// nodeAddr is the address of a node's Redis, for LockInfo.Node.
func nodeAddr(rdb redis.UniversalClient) string {
	switch r := rdb.(type) {
	case *redis.Client:
		return r.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(r.Options().Addrs, ",")
	}
	return ""
}
