package lock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// healthCheck is how often a silent pub/sub connection is pinged, to find
// one that broke without a word: once per default lease.
const healthCheck = 30 * time.Second

// waiters lets Lock calls sleep until a release is announced. Subscriptions
// are shared per Client and reference-counted per key: on a single Redis
// one pub/sub connection carries every channel; on Redis Cluster each
// waited-for key gets a sharded subscription on the node owning its slot.
// In quorum mode every node is subscribed to, and a message from any of
// them wakes the waiters.
type waiters struct {
	c      *Client
	mu     sync.Mutex // also serialises (un)subscribe commands
	queues map[string]*queue
	holds  map[string]int  // channel -> live holds of this Client on its key
	shared []*redis.PubSub // per node; made on first use (not for Redis Cluster)
	closed bool
}

// queue holds the waiters of one key in this process. Only the waiter
// holding gate talks to Redis, so a release does not send every local
// waiter at Redis at once; the others follow it in turn.
type queue struct {
	channel   string
	refs      int
	gate      chan struct{} // capacity 1: the waiter that holds it tries
	ready     chan struct{} // closed when Redis confirmed the subscription
	readyOnce sync.Once
	wake      chan struct{}   // capacity 1: a release (or resubscription) happened
	remaining atomic.Int64    // holder's lease (ns) at the head's last attempt
	sharded   []*redis.PubSub // Redis Cluster nodes: this key's own subscriptions
}

func newWaiters(c *Client) *waiters {
	return &waiters{c: c, queues: make(map[string]*queue), holds: make(map[string]int), shared: make([]*redis.PubSub, len(c.nodes))}
}

// wait blocks until h's key is taken for h's owner, ctx is done, the wait
// limit passes or the Client closes. remaining is the holder's lease as the
// last attempt saw it; the waiter tries again when it runs out even if no
// release is announced, so a lost message delays it, never strands it.
func (w *waiters) wait(ctx context.Context, h *hold, lc lockConfig, remaining time.Duration, start time.Time) (attemptResult, error) {
	var limit <-chan time.Time
	if lc.waitSet {
		t := time.NewTimer(lc.maxWait - time.Since(start))
		defer t.Stop()
		limit = t.C
	}
	q := w.join(h.rk.channel)
	defer w.leave(q)
	if remaining > 0 {
		q.remaining.Store(int64(remaining))
	}
	notObtained := func(err error, timedOut bool) (attemptResult, error) {
		e := &NotObtainedError{Key: h.key, RemainingLease: time.Duration(q.remaining.Load()), timedOut: timedOut}
		if err == nil {
			return attemptResult{}, e
		}
		return attemptResult{}, errors.Join(e, err)
	}

	select {
	case q.gate <- struct{}{}:
	case <-ctx.Done():
		return notObtained(ctx.Err(), false)
	case <-limit:
		return notObtained(nil, true)
	case <-w.c.life.Done():
		return attemptResult{}, ErrClosed
	}
	defer func() { <-q.gate }()

	ready := q.ready
	retry := time.NewTimer(retryAfter(remaining))
	defer retry.Stop()
	for {
		select {
		case <-ready:
			ready = nil // subscribed: try, a release may have come before
		case <-q.wake:
		case <-retry.C:
		case <-ctx.Done():
			return notObtained(ctx.Err(), false)
		case <-limit:
			return notObtained(nil, true)
		case <-w.c.life.Done():
			return attemptResult{}, ErrClosed
		}
		select {
		case <-q.wake: // this attempt sees every release announced so far
		default:
		}
		if w.heldHere(h.rk.channel) {
			// A hold of this Client has the key (the waiter before us):
			// its end wakes the queue, no need to ask Redis.
			retry.Reset(retryAfter(time.Duration(q.remaining.Load())))
			continue
		}
		res, err := h.attempt(ctx)
		if err != nil || res.ok {
			return res, err
		}
		q.remaining.Store(int64(res.remaining))
		retry.Reset(retryAfter(res.remaining))
	}
}

// retryAfter is when to try again without a release message: just after
// the holder's lease ends. When the lease is unknown (a key without TTL,
// not written by lockkit, or a waiter that queued without trying) it is a
// second.
func retryAfter(remaining time.Duration) time.Duration {
	if remaining <= 0 {
		return time.Second
	}
	return remaining + time.Millisecond
}

// held counts a hold of this Client on channel's key starting (+1) or
// ending (-1). While one lives, this process's waiters of the key do not
// ask Redis: the hold's end wakes them (see released).
func (w *waiters) held(channel string, delta int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holds[channel] += delta; w.holds[channel] <= 0 {
		delete(w.holds, channel)
	}
}

// released wakes this process's waiters of channel at once, as the
// release message would.
func (w *waiters) released(channel string) {
	w.mu.Lock()
	q := w.queues[channel]
	w.mu.Unlock()
	q.notify()
}

// heldHere reports whether a hold of this Client has channel's key.
func (w *waiters) heldHere(channel string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.holds[channel] > 0
}

// notify wakes the queue's head; q may be nil.
func (q *queue) notify() {
	if q == nil {
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// waiting reports whether this process has waiters for channel.
func (w *waiters) waiting(channel string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queues[channel] != nil
}

// join adds a waiter for channel, subscribing when it is the first.
func (w *waiters) join(channel string) *queue {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[channel]; q != nil {
		q.refs++
		return q
	}
	q := &queue{
		channel: channel,
		refs:    1,
		gate:    make(chan struct{}, 1),
		ready:   make(chan struct{}),
		wake:    make(chan struct{}, 1),
	}
	w.queues[channel] = q
	if w.closed {
		return q
	}
	ctx := w.c.life
	for i, nd := range w.c.nodes {
		if nd.sharded {
			ps := nd.rdb.SSubscribe(ctx, channel)
			q.sharded = append(q.sharded, ps)
			w.listen(ps)
			continue
		}
		if w.shared[i] == nil {
			w.shared[i] = nd.rdb.Subscribe(ctx)
			w.listen(w.shared[i])
		}
		// An error here is a broken connection: the PubSub subscribes again
		// when it reconnects, and until then the waiter retries when leases
		// end.
		_ = w.shared[i].Subscribe(ctx, channel)
	}
	return q
}

// leave removes a waiter, unsubscribing when it was the last.
func (w *waiters) leave(q *queue) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q.refs--; q.refs > 0 {
		return
	}
	delete(w.queues, q.channel)
	if w.closed {
		return
	}
	for _, ps := range q.sharded {
		_ = ps.Close()
	}
	for _, ps := range w.shared {
		if ps != nil {
			_ = ps.Unsubscribe(w.c.life, q.channel)
		}
	}
}

// listen dispatches what ps receives until ps is closed. Called with w.mu
// held.
func (w *waiters) listen(ps *redis.PubSub) {
	// go-redis pings a silent subscription every 3 s by default. Waiters
	// need it far less often: a broken subscription only delays them until
	// the holder's lease ends, when they try again anyway.
	ch := ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(healthCheck))
	w.c.tasks.run(func() {
		for msg := range ch {
			w.dispatch(msg)
		}
	})
}

func (w *waiters) dispatch(msg any) {
	var channel string
	subscribed := false
	switch m := msg.(type) {
	case *redis.Message:
		if strings.HasPrefix(m.Payload, w.c.id+":") {
			return // our own release: the queue was woken when it returned
		}
		channel = m.Channel
	case *redis.Subscription:
		if m.Kind != "subscribe" && m.Kind != "ssubscribe" {
			return
		}
		channel, subscribed = m.Channel, true
	default:
		return
	}
	w.mu.Lock()
	q := w.queues[channel]
	w.mu.Unlock()
	if q == nil {
		return
	}
	if subscribed {
		// Also after a reconnection: releases may have been missed.
		q.readyOnce.Do(func() { close(q.ready) })
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close closes every subscription; their listeners then end.
func (w *waiters) close() {
	w.mu.Lock()
	w.closed = true
	var all []*redis.PubSub
	for _, ps := range w.shared {
		if ps != nil {
			all = append(all, ps)
		}
	}
	for _, q := range w.queues {
		all = append(all, q.sharded...)
	}
	w.mu.Unlock()
	for _, ps := range all {
		_ = ps.Close()
	}
}
