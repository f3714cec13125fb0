package lock

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// MaxListedWaiters is how many waiters from the front of a key's queue
// [Client.Inspect] and [Client.List] return (LockInfo.Waiters).
const MaxListedWaiters = 10

// MaxListedPermits is how many holders of a semaphore or read-write lock
// [Client.Inspect] and [Client.List] return (LockInfo.Permits).
const MaxListedPermits = 100

// LockInfo is what Redis holds about one lock, semaphore or read-write
// lock, read in one atomic step.
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

	// Kind is what the key is used as: [KindLock] ([Client.Lock]; also a
	// key Redis holds nothing of), [KindSemaphore] ([Client.Acquire]) or
	// [KindReadWrite] ([Client.RLock], and Lock as its writer). Limit is
	// a semaphore's number of permits, 0 for the other kinds.
	Kind  string
	Limit int

	// Held tells that an owner holds the key: for a semaphore or a
	// read-write lock, that Holding > 0.
	//
	// Holder, with HoldCount levels, holds a lock for RemainingLease more
	// (the key's TTL in Redis); for a read-write lock these are its
	// writer's, when it has one, and they are empty for a semaphore and
	// for read holds (see Permits).
	Held           bool
	Holder         Owner
	HoldCount      int
	RemainingLease time.Duration
	// Token is the last fencing token handed out: the holder's while Held
	// (of a shared key: the newest acquisition's, whose holder may have
	// left).
	// 0 when Redis keeps none (the key's hash lapsed).
	Token uint64

	// Holding is how many owners hold a semaphore's permits or a
	// read-write lock's read holds or write hold, whose lease has not
	// ended by Redis's clock; 0 for a lock. Permits lists them, oldest
	// token first; of more than [MaxListedPermits] holders, that many
	// (which ones is not set). A waiter handed a permit holds it from
	// then on, for the claim window until it confirms.
	Holding int
	Permits []Permit

	// LastReleasedBy is the owner of the last full release of the lock,
	// while Redis keeps it (about a second after the release); Forced
	// tells that it was a [Client.ForceUnlock], and LastReleasedBy is then
	// the forcing Client's.
	LastReleasedBy Owner
	Forced         bool

	// Reserved tells that the lock is free but kept for the turn of a
	// queued waiter, ReservedFor, for TurnLeft more: [Client.TryLock]
	// is refused meanwhile. Semaphores and read-write locks have no turns:
	// their free room goes to the waiters at once.
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

// Permit is one holder of a semaphore or a read-write lock: a permit, a
// read hold, or the write hold.
type Permit struct {
	Owner Owner
	// HoldCount is how many levels the owner holds (re-entries count).
	HoldCount int
	// Token is the fencing token of the owner's acquisition.
	Token uint64
	// RemainingLease is how long the hold lasts without a renewal, by
	// Redis's clock.
	RemainingLease time.Duration
	// Write tells the write hold of a read-write lock (a [Client.Lock] of
	// its key); false for a read hold and for a semaphore's permit.
	Write bool
	// Handed tells a hold handed to a waiter that has not confirmed it
	// yet: RemainingLease is then what is left of the claim window.
	Handed bool
}

// Waiter is one queued [Client.Lock], [Client.Acquire] or [Client.RLock]
// call.
type Waiter struct {
	Owner Owner
	// Waited is how long it has been in the queue, by Redis's clock.
	Waited time.Duration
	// Read tells a queued [Client.RLock].
	Read bool
}

// Inspect returns what Redis holds about the lock of key: its holder and
// hold count, remaining lease, last fencing token, wait queue, and whether
// it is free but kept for a queued waiter's turn. Of a semaphore or a
// read-write lock it returns the kind and limit, and the holders whose
// lease has not ended (Holding, Permits). It reads with one script call
// per node and changes nothing.
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
	v, err := scripts.Inspect.Run(ctx, rdb, keys, MaxListedWaiters, MaxListedPermits).Slice()
	if err != nil {
		return LockInfo{}, err
	}
	return parseInspect(keys[0], v)
}

// parseInspect reads inspect.lua's reply about the lock hash name.
func parseInspect(name string, v []any) (LockInfo, error) {
	const head = 12 // fields before the holders
	if len(v) < head {
		return LockInfo{}, fmt.Errorf("unexpected reply %v", v)
	}
	num, str := replyInt, replyStr
	listed := int(num(v[11]))
	if listed < 0 || len(v) < head+2*listed || (len(v)-head-2*listed)%4 != 0 {
		return LockInfo{}, fmt.Errorf("unexpected reply %v", v)
	}
	now, pttl := num(v[0]), num(v[1])
	info := LockInfo{
		Name:      name,
		Kind:      KindLock,
		HoldCount: int(num(v[3])),
		Token:     uint64(num(v[4])),
		Waiting:   int(num(v[9])),
		Holding:   int(num(v[10])),
	}
	if r := str(v[5]); r != "" {
		forcer, forced := strings.CutPrefix(r, "!")
		info.LastReleasedBy, info.Forced = ParseOwner(forcer), forced
	}
	waiters := v[head+2*listed:]
	if k := str(v[8]); k != "" {
		return parseShared(info, k, now, v[head:head+2*listed], waiters)
	}
	if info.HoldCount > 0 {
		info.Held, info.Holder, info.RemainingLease = true, ParseOwner(str(v[2])), msAfter(pttl, 0)
	}
	openUntil := num(v[7])
	dead := map[string]bool{} // Clients whose waiter at the front missed its turn
	for i := 0; i < len(waiters); i += 4 {
		if info.Held && str(waiters[i]) == info.Holder.ID {
			info.Waiting-- // handed the lock, not confirmed yet
			continue
		}
		w := parseWaiter(now, waiters[i:i+4])
		info.Waiters = append(info.Waiters, w)
		if info.Held || info.Reserved {
			continue
		}
		// The first waiter whose deadline has not passed, and whose Client
		// has no waiter before it that missed its turn, has the turn of a
		// free lock with a queue (see queue.lua's first).
		client, _, _ := cutLast(w.Owner.ID, ":")
		deadline := num(waiters[i+1])
		if deadline <= now || dead[client] {
			dead[client] = true
			continue
		}
		info.Reserved, info.ReservedFor, info.TurnLeft = true, w.Owner, msAfter(deadline, now)
		if openUntil > now {
			info.TurnLeft = msAfter(openUntil, now)
		}
	}
	return info, nil
}

// parseShared fills in info of a semaphore or read-write lock, of kind k
// (share.lua's field), from inspect.lua's holders (owner, field value) and
// waiters (owner, deadline, joined, reader mark) at Redis's time now.
func parseShared(info LockInfo, k string, now int64, holders, waiters []any) (LockInfo, error) {
	info.HoldCount = 0
	info.Kind = KindReadWrite
	if limit, ok := strings.CutPrefix(k, "s"); ok {
		info.Kind = KindSemaphore
		info.Limit, _ = strconv.Atoi(limit)
	}
	for i := 0; i < len(holders); i += 2 {
		p, err := parsePermit(now, replyStr(holders[i]), replyStr(holders[i+1]))
		if err != nil {
			return LockInfo{}, err
		}
		info.Permits = append(info.Permits, p)
		if p.Write {
			info.Holder, info.HoldCount, info.RemainingLease = p.Owner, p.HoldCount, p.RemainingLease
		}
	}
	slices.SortFunc(info.Permits, func(a, b Permit) int { return cmp.Compare(a.Token, b.Token) })
	info.Held = info.Holding > 0
	for i := 0; i < len(waiters); i += 4 {
		info.Waiters = append(info.Waiters, parseWaiter(now, waiters[i:i+4]))
	}
	return info, nil
}

// parsePermit reads the field value v of holder owner of a shared key
// ("<p|r|w> <hold count> <token> <lease end in ms>", the kind in capitals
// while a hand-off is unconfirmed: see share.lua) at Redis's time now.
func parsePermit(now int64, owner, v string) (Permit, error) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return Permit{}, fmt.Errorf("unexpected holder %q of %q", v, owner)
	}
	n, err1 := strconv.Atoi(f[1])
	tok, err2 := strconv.ParseUint(f[2], 10, 64)
	end, err3 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Permit{}, fmt.Errorf("unexpected holder %q of %q: %w", v, owner, err)
	}
	kind := strings.ToLower(f[0])
	return Permit{Owner: ParseOwner(owner), HoldCount: n, Token: tok, RemainingLease: msAfter(end, now), Write: kind == "w", Handed: kind != f[0]}, nil
}

// parseWaiter reads one waiter of inspect.lua's reply (owner, deadline,
// joined, reader mark) at Redis's time now.
func parseWaiter(now int64, v []any) Waiter {
	w := Waiter{Owner: ParseOwner(replyStr(v[0])), Read: replyStr(v[3]) != ""}
	if joined := replyInt(v[2]); joined > 0 {
		w.Waited = msAfter(now, joined)
	}
	return w
}

// msAfter is how long t is after base, both in ms of one clock; 0 when t
// is not after base.
func msAfter(t, base int64) time.Duration {
	return time.Duration(max(t-base, 0)) * time.Millisecond
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
