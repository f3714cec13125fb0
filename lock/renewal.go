package lock

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// renewChunk is how many leases one renew.lua call extends on a single
// Redis. On Redis Cluster each call carries one lease (keys of different
// locks live in different slots); the pipeline still sends all calls to a
// node in one round trip.
const renewChunk = 200

// leaseState is what a renewal learned of one lease: whether its owner
// still held the key, or the error of its command.
type leaseState struct {
	alive bool
	err   error
}

// errTurnedShared fails the confirmation of a lock handed over whose key
// has become a read-write lock's: the watchdog tries again soon, with
// share.lua.
var errTurnedShared = errors.New("lock: the key became a read-write lock's; confirming again")

// renew runs renew.lua over batch in one pipeline and reports, per hold,
// whether its owner still held the key. A hold the key was handed to
// confirms with acquire.lua (share.lua for a shared hold) instead, which also takes it out of the wait
// queue (see queue.lua). A failed command fails only the leases it
// carried.
func (nd *node) renew(ctx context.Context, batch []*hold) []leaseState {
	chunk := renewChunk
	if nd.sharded {
		chunk = 1
	}
	var parts [][]*hold // one command each; the confirmations first
	var renewed []*hold
	for _, h := range batch {
		if h.handed.Load() {
			parts = append(parts, []*hold{h})
		} else {
			renewed = append(renewed, h)
		}
	}
	confirms := len(parts)
	for lo := 0; lo < len(renewed); lo += chunk {
		parts = append(parts, renewed[lo:min(lo+chunk, len(renewed))])
	}
	cmds := nd.pipelined(ctx, len(parts), func(i int) (scripts.Script, []string, []any) {
		if i < confirms {
			h := parts[i][0]
			if h.kind() != shareNone {
				return scripts.Share, h.rk.keys(), nd.shareArgs(h, opConfirm, 1, 0)
			}
			return scripts.Acquire, h.rk.keys(), []any{h.ownerArg, h.leaseArg, 1, nd.claimArg, confirm, nd.publish}
		}
		keys := make([]string, len(parts[i]))
		args := make([]any, 0, 2*len(parts[i]))
		for j, h := range parts[i] {
			keys[j] = h.rk.lock
			args = append(args, h.ownerArg, h.leaseArg)
		}
		return scripts.Renew, keys, args
	})
	states := make(map[*hold]leaseState, len(batch))
	for i, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if i < confirms && err == nil && len(v) == 2 {
			if v[0] == -3 { // a read-write lock's key: confirm with share.lua next time
				parts[i][0].turnedShared()
				err = errTurnedShared
			}
			v = v[:1] // {1, token} when confirmed, {-1, 0} when gone
		}
		if err == nil && len(v) != len(parts[i]) {
			err = fmt.Errorf("%d replies for %d leases", len(v), len(parts[i]))
		}
		for j, h := range parts[i] {
			if err != nil {
				states[h] = leaseState{err: err}
			} else {
				states[h] = leaseState{alive: v[j] == 1}
			}
		}
	}
	ordered := make([]leaseState, len(batch))
	for i, h := range batch {
		ordered[i] = states[h]
	}
	return ordered
}
