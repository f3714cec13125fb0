package lock

import (
	"context"
	"time"

	"github.com/lockkit/lockkit/lock/internal/janitor"
)

// abandon hands h's owner to the janitor (see janitor.Janitor.Abandon),
// unless there is nothing to clean up: an owner that cannot hold the key,
// where Redis keeps no wait queue.
func (c *Client) abandon(h *hold, mayHold bool, wait time.Duration) {
	if !mayHold && !c.be.queued() {
		return // no queue to leave
	}
	c.jan.Abandon(h, mayHold, wait)
}

// A partCleaner is a backend whose nodes confirm a cleanup each on its
// own (see janitor.Parts): node i is janitor part i%64.
type partCleaner interface {
	// clean releases h's owner on the nodes of parts (see janitor.Clean).
	clean(ctx context.Context, h *hold, parts janitor.Parts) (confirmed janitor.Parts, settled bool)
}

// clean is the janitor's cleanup (see janitor.Clean): it takes h's owner
// out of the key's wait queue, passing on a turn it had, and with mayHold
// releases its hold on the key, if any. On one Redis that is one part,
// confirmed when Redis answered both; a backend with several nodes
// cleans up on each of parts (see partCleaner).
func (c *Client) clean(ctx context.Context, h *hold, mayHold bool, parts janitor.Parts) (janitor.Parts, bool) {
	if pc, ok := c.be.(partCleaner); ok {
		return pc.clean(ctx, h, parts)
	}
	if mayHold && !c.be.nodes().settled(h.releaseVotes(ctx, 0)) {
		return 0, false
	}
	if !c.be.leave(ctx, h) {
		return 0, false
	}
	return janitor.All, true
}
