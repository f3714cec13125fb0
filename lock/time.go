package lock

import (
	"context"
	"time"
)

// Time returns the time by Redis's clock (the TIME command), from the
// first node that answers, for replicas that must compare their clocks
// (package cronlock measures each replica's offset with it). Like every
// call it returns within ctx's deadline, with the Redis error or ctx's
// when no node answered.
func (c *Client) Time(ctx context.Context) (time.Time, error) {
	if c.isClosed() {
		return time.Time{}, ErrClosed
	}
	rs := fanOut(c.be.nodes(), ctx, c.be.timeout(c.cfg.lease), func(ctx context.Context, nd *node) (time.Time, error) {
		return nd.rdb.Time(ctx).Result()
	}, nil)
	var err error
	for _, r := range rs {
		if r.err == nil {
			return r.val, nil
		}
		err = r.err
	}
	return time.Time{}, err
}
