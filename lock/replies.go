package lock

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// parseReleased reads release.lua's reply. With WithReplicaAck a release
// the replicas did not confirm fails with ErrReplicaAck, but still
// reports what the script did (it ran on the primary), so that a waiter
// it handed the key to is woken.
func parseReleased(cmd *redis.Cmd) (released, error) {
	v, err := cmd.Slice()
	if errors.Is(err, ErrReplicaAck) {
		v, _ = cmd.Val().([]any)
	}
	if v == nil {
		return released{}, err
	}
	r := released{ok: len(v) > 0 && v[0] == int64(1), shared: len(v) == 1 && v[0] == int64(-3)}
	switch len(v) {
	case 1:
	case 4:
		r.next.owner, _ = v[1].(string)
		r.next.token, _ = v[2].(int64)
		r.next.at, _ = v[3].(int64)
	default:
		return released{}, fmt.Errorf("unexpected reply %v", v)
	}
	return r, err
}

// released is release.lua's reply.
type released struct {
	ok     bool    // the owner's count is at the target
	shared bool    // the key has shared holds: share.lua releases it
	next   handOff // the waiter the key was handed to, if any
}

// A handOff tells that a release gave the key to a queued waiter, owner,
// with token, at Redis's time at (ms), for the claim window.
type handOff struct {
	owner string
	token int64
	at    int64
}
