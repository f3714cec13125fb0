// Package health skips a Redis node of a quorum that failed repeatedly,
// probing it once in a while until it answers again.
package health

import (
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Tracker tracks a node's failures: a node that failed failLimit times
// in a row is not called until skipUntil, then once, as a probe (see
// Available). A nil Tracker is never skipped. The zero Tracker is a
// healthy node.
type Tracker struct {
	mu        sync.Mutex
	fails     int
	skipUntil time.Time
}

// failLimit failures in a row make a node be skipped for downBackoff,
// after which one call probes it.
const (
	failLimit   = 3
	downBackoff = time.Second
)

// Available reports whether a call should be sent to the node: not while
// it is skipped after repeated failures, except for one probe each
// downBackoff.
func (nh *Tracker) Available() bool {
	if nh == nil {
		return true
	}
	nh.mu.Lock()
	defer nh.mu.Unlock()
	if nh.fails < failLimit {
		return true
	}
	now := time.Now()
	if now.Before(nh.skipUntil) {
		return false
	}
	nh.skipUntil = now.Add(downBackoff) // this call probes it
	return true
}

// Observe records the outcome of a call: an error that is not Redis's
// reply (no answer in time, no connection) counts as a failure of the
// node; anything else makes it healthy again.
func (nh *Tracker) Observe(err error) {
	if nh == nil {
		return
	}
	var re redis.Error
	failed := err != nil && !errors.As(err, &re)
	nh.mu.Lock()
	defer nh.mu.Unlock()
	if !failed {
		nh.fails = 0
		return
	}
	if nh.fails++; nh.fails == failLimit {
		nh.skipUntil = time.Now().Add(downBackoff)
	}
}
