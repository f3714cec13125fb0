// Package pubsub keeps the pub/sub subscriptions of a lock Client's
// waiters on one Redis deployment, and finds a connection that stopped
// delivering (a half-open one) by pinging it when it is silent.
package pubsub

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/tasks"
)

// A Receiver gets what a Subscriber's connections deliver, in the
// goroutine that reads the connection.
type Receiver interface {
	// Message handles a message published on channel.
	Message(channel, payload string)
	// Subscribed tells that Redis confirmed the subscription of channel:
	// the first time, and again after each reconnection, when messages
	// may have been missed.
	Subscribed(channel string)
	// Recheck tells that a connection carrying channels left a
	// health-check PING unanswered for lateAfter, and again every
	// recheckEvery while it stays silent: a message told on it may be
	// lost or late.
	Recheck()
}

// healthCheck is how long a pub/sub connection that carries no channel
// may stay silent before it is pinged, to find one that broke without a
// word (a half-open connection: its peer, or a NAT or load balancer on
// the way, dropped it without a reset).
const healthCheck = 5 * time.Second

// receivePause is how long the receive loop waits before a receive that
// follows a failed one, so that an unreachable Redis is not dialled in a
// busy loop.
const receivePause = 100 * time.Millisecond

// timing is what the health checks of busy connections wait, derived from
// the claim window of the key's wait queue.
type timing struct {
	// busyCheck is how long a connection that carries channels, so that
	// waiters count on it, may stay silent before it is pinged: a claim
	// window. A hand-off whose message such a connection swallowed keeps the
	// waiter's place for half a window more than the window (see hand_off in
	// queue.lua); the ping goes unanswered for lateAfter, and every waiter of
	// the Client tries again, then every recheckEvery until the connection
	// answers or is replaced, so the waiter obtains the key it was handed
	// within busyCheck + lateAfter of the last thing the connection delivered,
	// or within recheckEvery of a hand-off told later.
	// The cost: one PING per claim window per silent connection with waiters,
	// whatever their number (one connection per Client; on Redis Cluster one
	// per waited-for key), none while messages come.
	busyCheck time.Duration

	// lateAfter is how long a health-check PING may go unanswered before the
	// connection counts as late and every waiter of the Client tries once: a
	// healthy Redis answers in well under a millisecond; a quarter window
	// leaves room for a loaded machine, and for the waiters' attempts within
	// the extra half window a hand-off keeps their place.
	lateAfter time.Duration

	// recheckEvery is how often every waiter of the Client tries again while
	// a health-check PING stays unanswered, after the first try at lateAfter:
	// a hand-off told meanwhile is lost or late too, and the key handed over
	// is kept for its waiter for a window (its place for a window and a
	// half), so tries half a window apart find it in time, until the
	// connection answers or is replaced.
	recheckEvery time.Duration

	// pingTimeout bounds a health-check PING and the wait for its answer; a
	// connection that does not answer in time is replaced (and its waiters
	// try again once resubscribed). Longer than a slow connection takes (a
	// pub/sub connection delivering 2 s late must not be replaced over and
	// over, losing what was on its way each time).
	pingTimeout time.Duration
}

// newTiming is the timing for a claim window of window: busyCheck a
// window, lateAfter a quarter, recheckEvery a half, pingTimeout
// lateAfter and two windows.
func newTiming(window time.Duration) timing {
	late := window / 4
	return timing{busyCheck: window, lateAfter: late, recheckEvery: window / 2, pingTimeout: late + 2*window}
}

// A Subscriber keeps one node's subscriptions to the channels of the keys
// a Client's waiters wait for. Its one goroutine sends the SUBSCRIBE
// and UNSUBSCRIBE commands in the order they were asked for, so no Lock
// call and no lock of the waiters' bookkeeping waits on a Redis call: a
// stalled Redis delays subscriptions (waiters then retry when leases end),
// never a deadline or Close.
type Subscriber struct {
	rdb     redis.UniversalClient
	sharded bool // Redis Cluster: one sharded subscription per channel
	life    context.Context
	tasks   *tasks.Runner
	r       Receiver
	timing

	mu   sync.Mutex
	ops  []subOp // asked for, not yet sent
	kick chan struct{}
	// channels the shared connection carries (subscribed, not yet
	// unsubscribed); read by its listener
	carried atomic.Int64

	// Used by the goroutine only.
	shared *redis.PubSub            // one connection carries every channel
	subs   map[string]*redis.PubSub // Redis Cluster: one sharded subscription per channel
}

type subOp struct {
	channel string
	on      bool // subscribe; otherwise unsubscribe
}

// New returns a Subscriber to the channels of rdb (with sharded, Redis
// Cluster's sharded channels, one connection each), whose commands run
// under life and whose connections are read in goroutines of t and
// deliver to r. window is the
// claim window of the keys' wait queues, which bounds how long a
// connection carrying channels may stay silent (see busyCheck). Run sends
// what Ask asks for.
func New(life context.Context, rdb redis.UniversalClient, sharded bool, t *tasks.Runner, r Receiver, window time.Duration) *Subscriber {
	return &Subscriber{rdb: rdb, sharded: sharded, life: life, tasks: t, r: r, timing: newTiming(window),
		kick: make(chan struct{}, 1), subs: make(map[string]*redis.PubSub)}
}

// Ask queues a subscription (on) or its end for channel.
func (s *Subscriber) Ask(channel string, on bool) {
	s.mu.Lock()
	s.ops = append(s.ops, subOp{channel, on})
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run sends what was asked for until life ends, then closes the
// subscriptions; their listeners end with them.
func (s *Subscriber) Run() {
	life := s.life
	defer s.closeAll()
	for {
		select {
		case <-life.Done():
			return
		case <-s.kick:
		}
		s.mu.Lock()
		ops := s.ops
		s.ops = nil
		s.mu.Unlock()
		for _, op := range ops {
			if life.Err() != nil {
				return
			}
			s.apply(op)
		}
	}
}

// apply sends one command. An error is a broken connection: a PubSub
// subscribes again when it reconnects, and until then waiters retry when
// leases end.
func (s *Subscriber) apply(op subOp) {
	life := s.life
	switch {
	case s.sharded && op.on:
		if s.subs[op.channel] == nil {
			ps := s.rdb.SSubscribe(life, op.channel)
			s.subs[op.channel] = ps
			s.listen(ps, func() bool { return true }) // closed when unsubscribed
		}
	case s.sharded:
		if ps := s.subs[op.channel]; ps != nil {
			delete(s.subs, op.channel)
			_ = ps.Close()
		}
	case op.on:
		if s.shared == nil {
			s.shared = s.rdb.Subscribe(life)
			s.listen(s.shared, func() bool { return s.carried.Load() > 0 })
		}
		s.carried.Add(1)
		_ = s.shared.Subscribe(life, op.channel)
	case s.shared != nil:
		s.carried.Add(-1)
		_ = s.shared.Unsubscribe(life, op.channel)
	}
}

func (s *Subscriber) closeAll() {
	if s.shared != nil {
		_ = s.shared.Close()
	}
	for _, ps := range s.subs {
		_ = ps.Close()
	}
}

// listen delivers what ps receives until ps is closed or life ends; busy tells whether ps carries channels now (see busyCheck).
// The loop reads the subscription itself, rather than through
// go-redis's channel goroutine (which works under context.TODO), so that
// every command on the connection runs under life (the Client's, which
// derives from the Observer's Background context): the first
// connection and each reconnection (HELLO, the resubscribing of every
// channel) as well as the health-check pings. A reconnection happens when
// a receive or a ping finds the connection broken; go-redis then
// subscribes every channel again, and the confirmations are delivered
// (see Receiver.Subscribed): the waiters may have missed messages.
func (s *Subscriber) listen(ps *redis.PubSub, busy func() bool) {
	life := s.life
	s.tasks.Run(func() {
		failed := false
		heard := time.Now() // when the connection last delivered something
		for {
			msg, err := ps.ReceiveTimeout(life, s.busyCheck)
			switch {
			case err == nil:
				failed = false
				heard = time.Now()
				s.deliver(msg)
				continue
			case errors.Is(err, redis.ErrClosed) || life.Err() != nil:
				return
			case isTimeout(err): // silent: is the connection still there?
				if busy() || time.Since(heard) >= healthCheck {
					if s.probe(ps) {
						heard = time.Now()
					}
				}
				continue
			}
			if failed && !pause(life, receivePause) {
				return
			}
			failed = true
		}
	})
}

// probe pings a silent subscription and waits up to pingTimeout for
// anything to arrive, which it delivers. When nothing has come after
// lateAfter, the Receiver is told to recheck, and again every
// recheckEvery while nothing comes: a message may have been lost or be
// late. When nothing comes at all (a half-open connection: the PING went into a socket whose
// peer, or a NAT on the way, is gone), the read that gave up counts as a
// broken connection for go-redis (a read without an allowance for
// timeouts), which replaces it and subscribes every channel again on the
// next receive.
//
// It reports whether the connection answered.
func (s *Subscriber) probe(ps *redis.PubSub) bool {
	ctx, cancel := context.WithTimeout(s.life, s.pingTimeout)
	defer cancel()
	if ps.Ping(ctx) != nil {
		return false // go-redis reconnects after a failed write
	}
	msg, err := ps.ReceiveTimeout(ctx, s.lateAfter) // a timeout here keeps the connection
	for isTimeout(err) && ctx.Err() == nil {
		s.r.Recheck()
		if d, _ := ctx.Deadline(); time.Until(d) <= s.recheckEvery+s.lateAfter {
			msg, err = ps.Receive(ctx) // the last read: one that gives up replaces the connection
			break
		}
		msg, err = ps.ReceiveTimeout(ctx, s.recheckEvery)
	}
	if err != nil {
		return false
	}
	s.deliver(msg)
	return true
}

// deliver hands a message or a subscription's confirmation to the
// Receiver; anything else (a PONG, an unsubscription) only shows the
// connection alive.
func (s *Subscriber) deliver(msg any) {
	switch m := msg.(type) {
	case *redis.Message:
		s.r.Message(m.Channel, m.Payload)
	case *redis.Subscription:
		if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
			s.r.Subscribed(m.Channel)
		}
	}
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// pause waits d; it reports false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
