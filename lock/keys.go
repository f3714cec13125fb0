package lock

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
)

// maxPlainTag is the longest escaped key kept readable in Redis; longer keys
// are stored under their SHA-256 digest.
const maxPlainTag = 128

// tagEscaper makes a key safe inside a Redis hash tag. Escaping '%' first
// keeps the mapping one-to-one; braces would end or start the tag.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// redisKeys are the Redis names of one lock. All share the hash tag
// {tag}, so a lock's scripts run on one Redis Cluster slot. They are never
// changed once made: holds of one key share them (see keyCache).
type redisKeys struct {
	lock    string // hash: owner, hold count, token (see queue.lua), with the lease as TTL
	channel string // hand-offs and turns
	args    []any  // "", "", 4 and the KEYS of acquire.lua, release.lua and leave.lua, boxed once
}

func newRedisKeys(prefix, key string) redisKeys {
	return tagKeys(prefix, hashTag(key))
}

// keyCacheSize bounds a Client's keyCache.
const keyCacheSize = 256

// keyCache keeps the Redis names of the keys a Client locked last, so that
// a hot key's names are made once rather than at every Lock (they take six
// allocations). It holds at most keyCacheSize keys of at most maxPlainTag
// bytes, and is emptied when full.
type keyCache struct {
	prefix string
	mu     sync.Mutex
	m      map[string]redisKeys
}

func newKeyCache(prefix string) *keyCache {
	return &keyCache{prefix: prefix, m: make(map[string]redisKeys)}
}

// get returns key's Redis names.
func (kc *keyCache) get(key string) redisKeys {
	if len(key) > maxPlainTag {
		return newRedisKeys(kc.prefix, key)
	}
	kc.mu.Lock()
	rk, ok := kc.m[key]
	kc.mu.Unlock()
	if ok {
		return rk
	}
	rk = newRedisKeys(kc.prefix, key)
	kc.mu.Lock()
	if len(kc.m) >= keyCacheSize {
		clear(kc.m)
	}
	kc.m[key] = rk
	kc.mu.Unlock()
	return rk
}

// tagKeys are the Redis names of the lock whose hash tag is tag.
func tagKeys(prefix, tag string) redisKeys {
	// One string holds every name, each a slice of it: one allocation.
	all := prefix + ":{" + tag + "}:queue" + prefix + ":{" + tag + "}:waits" + prefix + ":{" + tag + "}:released"
	n := len(prefix) + len(tag) + 3
	base := all[:n]
	queue := all[:n+6]
	waits := all[n+6 : 2*n+12]
	channel := all[2*n+12:]
	return redisKeys{lock: base, channel: channel, args: []any{
		"", "", 4, // EVALSHA, the script's hash, the number of keys
		base,    // the lock
		queue,   // list: waiting owners in arrival order
		waits,   // hash: waiting owner -> deadline
		channel, // hand-offs and turns
	}}
}

// keys returns the KEYS of acquire.lua, release.lua and leave.lua.
func (rk redisKeys) keys() []string {
	return []string{rk.args[3].(string), rk.args[4].(string), rk.args[5].(string), rk.args[6].(string)}
}

// scriptArgs returns the arguments of a script call on these keys: room
// for EVALSHA and the hash, the keys, then argv.
func (rk redisKeys) scriptArgs(argv ...any) []any {
	args := make([]any, 0, len(rk.args)+len(argv))
	return append(append(args, rk.args...), argv...)
}

// hashTag maps a user key one-to-one to a string with no braces and at most
// 2+2*sha256.Size bytes. Escaped keys contain '%' only before two hex
// digits, so the "%h" that marks a digest never collides with them.
func hashTag(key string) string {
	tag := tagEscaper.Replace(key)
	if len(tag) <= maxPlainTag {
		return tag
	}
	sum := sha256.Sum256([]byte(key))
	return "%h" + hex.EncodeToString(sum[:])
}
