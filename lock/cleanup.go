package lock

import (
	"context"
	"time"
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

// clean takes h's owner out of the key's wait queue, passing on a turn it
// had, and with mayHold releases its hold on the key, if any. It reports
// whether enough nodes answered to know that the owner blocks nothing (the
// one node, or a majority).
func (c *Client) clean(ctx context.Context, h *hold, mayHold bool) bool {
	if mayHold && !c.be.nodes().settled(h.releaseVotes(ctx, 0)) {
		return false
	}
	return c.be.leave(ctx, h)
}
