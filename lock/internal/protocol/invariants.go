package protocol

import (
	"fmt"
	"slices"
	"strings"
)

// Consistent reports the first way k's data breaks the protocol's
// invariants on one snapshot: every Redis key has a TTL; at most Limit
// holders of a lock; the queue holds distinct owners, exactly the owners
// of the waits hash, each with its join time; and a lock's queue exists
// only while the hash flags it or is gone.
func (k Key) Consistent() error {
	switch {
	case k.Hash != nil && k.HashExp == NoTTL:
		return fmt.Errorf("lock hash without a TTL: %v", k.Hash)
	case k.Queue != nil && k.QueueExp == NoTTL:
		return fmt.Errorf("queue without a TTL: %v", k.Queue)
	case k.Waits != nil && k.WaitsExp == NoTTL:
		return fmt.Errorf("waits hash without a TTL: %v", k.Waits)
	case len(k.Holders()) > Limit:
		return fmt.Errorf("%d holders", len(k.Holders()))
	}
	seen := map[string]bool{}
	for _, o := range k.Queue {
		if seen[o] {
			return fmt.Errorf("%s twice in the queue %v", o, k.Queue)
		}
		seen[o] = true
		if _, ok := k.Waits[o]; !ok {
			return fmt.Errorf("%s queued without a deadline", o)
		}
		if _, ok := k.Waits[">"+o]; !ok {
			return fmt.Errorf("%s queued without a join time", o)
		}
	}
	for f := range k.Waits {
		if !seen[strings.TrimLeft(f, ">~")] { // its join time, or a reader's mark
			return fmt.Errorf("waits field %s of no queued owner (queue %v)", f, k.Queue)
		}
	}
	if k.Queue != nil && k.Hash != nil && !k.flagged() && k.Hash["k"] == "" { // share.lua needs no flag
		return fmt.Errorf("queue %v not flagged in the hash %v", k.Queue, k.Hash)
	}
	if k.Queue != nil && slices.Contains(k.Queue, "") {
		return fmt.Errorf("empty owner queued")
	}
	return nil
}
