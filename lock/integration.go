package lock

import (
	"context"
	"time"
)

// Integration is what lockkit's integrations (packages ginlock and
// cronlock) use of a Client beyond [Locker]: Redis's clock, a check of
// lock options when a service is configured rather than at every call,
// and the mark of their own bookkeeping locks. Applications need none of
// it. Get one with [Client.Integration]; the zero Integration belongs to
// no Client.
type Integration struct {
	c *Client
}

// Integration returns the surface of c that lockkit's integrations use.
func (c *Client) Integration() Integration { return Integration{c} }

// Time returns the time by Redis's clock (the TIME command), from the
// first node that answers, for replicas that must compare their clocks
// (package cronlock measures each replica's offset with it). Like every
// call it returns within ctx's deadline, with the Redis error or ctx's
// when no node answered; [ErrClosed] after Close, and an error wrapping
// [ErrInvalid] for the zero Integration.
func (i Integration) Time(ctx context.Context) (time.Time, error) {
	c := i.c
	switch {
	case c == nil:
		return time.Time{}, invalidf("Time of the zero Integration, which has no Client")
	case c.isClosed():
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

// CheckLockOptions reports, as an error wrapping [ErrInvalid], whether
// opts would make every [Client.Lock] or [Client.TryLock] of the Client
// fail, checked with its default lease and drift allowance; the zero
// Integration checks with [DefaultLease] and the default drift allowance
// (a Client with [WithDrift] checks its own again). Package ginlock uses
// it to refuse a configuration when a route is registered rather than on
// every request.
func (i Integration) CheckLockOptions(opts ...LockOption) error {
	cfg := &config{lease: DefaultLease}
	if i.c != nil {
		cfg = &i.c.cfg
	}
	_, err := cfg.lockConfig(opts)
	return err
}

// Internal returns the option that marks a lock an integration takes for
// its own bookkeeping rather than to protect the caller's work, such as
// the tick markers of package cronlock. Observers are told
// ([Acquire.Internal]): package otellock records its metrics but, unless
// asked to, no spans, and marks its contexts, the lock context included,
// so that work under them starts no trace. Its owner in Redis is marked
// ([Owner.Internal]), so listings for people (lockkit ls) keep it apart
// from the users' locks. Do not use it for locks whose critical section
// should be traced. It does not depend on the Integration's Client.
func (Integration) Internal() LockOption {
	return func(c *lockConfig) { c.internal = true }
}
