package protocol

import (
	"maps"
	"slices"
	"strconv"
)

// NoTTL is the expiry of a key that has no TTL (Exp fields). The protocol
// never leaves one: see [Key.Consistent].
const NoTTL = 0

// Key is the Redis data of one lock key at some moment: the three Redis
// keys the scripts touch, each with the moment it expires (ms of Redis's
// clock). A missing Redis key is a nil map or an empty queue.
type Key struct {
	// Hash is the lock hash: o the owner, n its hold count (0 or missing:
	// free), t the last fencing token, r the owner of the last full
	// release, q "1" when a wait queue may exist, open and open_until a
	// turn open to any queued waiter from open until open_until (ms).
	Hash    map[string]string
	HashExp int64

	// Queue holds the waiting owners in arrival order.
	Queue    []string
	QueueExp int64

	// Waits maps a waiting owner to its deadline (ms) and ">"+owner to
	// when it joined the queue (ms).
	Waits    map[string]int64
	WaitsExp int64
}

// Clone returns a deep copy of k.
func (k Key) Clone() Key {
	k.Hash = maps.Clone(k.Hash)
	k.Queue = slices.Clone(k.Queue)
	k.Waits = maps.Clone(k.Waits)
	return k
}

// At returns k's data at now: a Redis key whose expiry is before now is
// gone, as Redis drops it when a script touches it.
func (k Key) At(now int64) Key {
	k = k.Clone()
	if gone(k.HashExp, now) || len(k.Hash) == 0 {
		k.Hash, k.HashExp = nil, NoTTL
	}
	if gone(k.QueueExp, now) || len(k.Queue) == 0 {
		k.Queue, k.QueueExp = nil, NoTTL
	}
	if gone(k.WaitsExp, now) || len(k.Waits) == 0 {
		k.Waits, k.WaitsExp = nil, NoTTL
	}
	return k
}

// gone reports whether a key expiring at exp is expired at now. Redis
// keeps a key up to and including the millisecond it expires at.
func gone(exp, now int64) bool { return exp != NoTTL && now > exp }

// Empty reports whether none of the key's Redis keys exists.
func (k Key) Empty() bool { return k.Hash == nil && k.Queue == nil && k.Waits == nil }

// field returns hash field f and whether it is set.
func (k Key) field(f string) (string, bool) {
	v, ok := k.Hash[f]
	return v, ok
}

// num is Lua's tonumber(v or '0') of hash field f: 0 when missing or not
// a number.
func (k Key) num(f string) int64 {
	v, err := strconv.ParseInt(k.Hash[f], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// count is the hold count of the lock: 0 when free.
func (k Key) count() int64 { return k.num("n") }

// owner is the hash's o field ("" when missing).
func (k Key) owner() string { return k.Hash["o"] }

// flagged reports whether the hash flags a queue (q = "1").
func (k Key) flagged() bool { return k.Hash["q"] == "1" }

// token is the hash's last fencing token, and whether it is set.
func (k Key) token() (int64, bool) {
	v, ok := k.Hash["t"]
	if !ok {
		return 0, false
	}
	t, err := strconv.ParseInt(v, 10, 64)
	return t, err == nil
}

// waiting reports whether owner is in the waits hash (queued).
func (k Key) waiting(owner string) bool {
	_, ok := k.Waits[owner]
	return ok
}

// pttl is Redis's PTTL of a key expiring at exp at now: -2 when it does
// not exist, -1 when it has no TTL.
func pttl(exists bool, exp, now int64) int64 {
	switch {
	case !exists:
		return -2
	case exp == NoTTL:
		return -1
	}
	return exp - now
}

// ClientOf is the Client part of owner o ("<client id>:<seq>"): the text
// before its last ':', or o when it has none.
func ClientOf(o string) string {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i] == ':' {
			return o[:i]
		}
	}
	return o
}
