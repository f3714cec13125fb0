package lock

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxPlainTag is the longest escaped key kept readable in Redis; longer keys
// are stored under their SHA-256 digest.
const maxPlainTag = 128

// tagEscaper makes a key safe inside a Redis hash tag. Escaping '%' first
// keeps the mapping one-to-one; braces would end or start the tag.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// redisKeys are the Redis names of one lock. All share the hash tag
// {tag}, so a lock's scripts run on one Redis Cluster slot.
type redisKeys struct {
	lock    string   // hash: owner, hold count, token (see queue.lua), with the lease as TTL
	channel string   // hand-offs and turns
	scripts []string // the KEYS of acquire.lua, release.lua and leave.lua
}

func newRedisKeys(prefix, key string) redisKeys {
	base := prefix + ":{" + hashTag(key) + "}"
	channel := base + ":released"
	return redisKeys{lock: base, channel: channel, scripts: []string{
		base,            // the lock
		base + ":queue", // list: waiting owners in arrival order
		base + ":waits", // hash: waiting owner -> deadline
		channel,
	}}
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
