package lock

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// healthCheck is how long a pub/sub connection that carries no channel
// may stay silent before it is pinged, to find one that broke without a
// word (a half-open connection: its peer, or a NAT or load balancer on
// the way, dropped it without a reset).
const healthCheck = 5 * time.Second

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
const busyCheck = claimWindow

// lateAfter is how long a health-check PING may go unanswered before the
// connection counts as late and every waiter of the Client tries once: a
// healthy Redis answers in well under a millisecond; a quarter window
// leaves room for a loaded machine, and for the waiters' attempts within
// the extra half window a hand-off keeps their place.
const lateAfter = claimWindow / 4

// recheckEvery is how often every waiter of the Client tries again while
// a health-check PING stays unanswered, after the first try at lateAfter:
// a hand-off told meanwhile is lost or late too, and the key handed over
// is kept for its waiter for a window (its place for a window and a
// half), so tries half a window apart find it in time, until the
// connection answers or is replaced.
const recheckEvery = claimWindow / 2

// pingTimeout bounds a health-check PING and the wait for its answer; a
// connection that does not answer in time is replaced (and its waiters
// try again once resubscribed). Longer than a slow connection takes (a
// pub/sub connection delivering 2 s late must not be replaced over and
// over, losing what was on its way each time).
const pingTimeout = lateAfter + 2*claimWindow

// receivePause is how long the receive loop waits before a receive that
// follows a failed one, so that an unreachable Redis is not dialled in a
// busy loop.
const receivePause = 100 * time.Millisecond

// subscriber keeps one node's subscriptions to the channels of the keys
// this Client's waiters wait for. Its one goroutine sends the SUBSCRIBE
// and UNSUBSCRIBE commands in the order they were asked for, so no Lock
// call and no lock of the waiters' bookkeeping waits on a Redis call: a
// stalled Redis delays subscriptions (waiters then retry when leases end),
// never a deadline or Close.
type subscriber struct {
	w    *waiters
	nd   *node
	mu   sync.Mutex
	ops  []subOp // asked for, not yet sent
	kick chan struct{}
	// channels the shared connection carries (subscribed, not yet
	// unsubscribed); read by its listener
	carried atomic.Int64

	// Used by the goroutine only.
	shared  *redis.PubSub            // one connection carries every channel
	sharded map[string]*redis.PubSub // Redis Cluster: one sharded subscription per channel
}

type subOp struct {
	channel string
	on      bool // subscribe; otherwise unsubscribe
}

func newSubscriber(w *waiters, nd *node) *subscriber {
	return &subscriber{w: w, nd: nd, kick: make(chan struct{}, 1), sharded: make(map[string]*redis.PubSub)}
}

// ask queues a subscription (on) or its end for channel.
func (s *subscriber) ask(channel string, on bool) {
	s.mu.Lock()
	s.ops = append(s.ops, subOp{channel, on})
	s.mu.Unlock()
	signal(s.kick)
}

// run sends what was asked for until Close, then closes the subscriptions;
// their listeners end with them.
func (s *subscriber) run() {
	life := s.w.c.life
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
func (s *subscriber) apply(op subOp) {
	life := s.w.c.life
	rdb := s.nd.rdb
	switch {
	case s.nd.sharded && op.on:
		if s.sharded[op.channel] == nil {
			ps := rdb.SSubscribe(life, op.channel)
			s.sharded[op.channel] = ps
			s.w.listen(ps, func() bool { return true }) // closed when unsubscribed
		}
	case s.nd.sharded:
		if ps := s.sharded[op.channel]; ps != nil {
			delete(s.sharded, op.channel)
			_ = ps.Close()
		}
	case op.on:
		if s.shared == nil {
			s.shared = rdb.Subscribe(life)
			s.w.listen(s.shared, func() bool { return s.carried.Load() > 0 })
		}
		s.carried.Add(1)
		_ = s.shared.Subscribe(life, op.channel)
	case s.shared != nil:
		s.carried.Add(-1)
		_ = s.shared.Unsubscribe(life, op.channel)
	}
}

func (s *subscriber) closeAll() {
	if s.shared != nil {
		_ = s.shared.Close()
	}
	for _, ps := range s.sharded {
		_ = ps.Close()
	}
}

// listen dispatches what ps receives until ps is closed or the Client's
// life ends; busy tells whether ps carries channels now (see busyCheck).
// The loop reads the subscription itself, rather than through
// go-redis's channel goroutine (which works under context.TODO), so that
// every command on the connection runs under the Client's life context,
// which derives from the Observer's Background context: the first
// connection and each reconnection (HELLO, the resubscribing of every
// channel) as well as the health-check pings. A reconnection happens when
// a receive or a ping finds the connection broken; go-redis then
// subscribes every channel again, and the confirmations wake the waiters
// (see [waiters.dispatch]), which may have missed messages.
func (w *waiters) listen(ps *redis.PubSub, busy func() bool) {
	life := w.c.life
	w.c.tasks.Run(func() {
		failed := false
		heard := time.Now() // when the connection last delivered something
		for {
			msg, err := ps.ReceiveTimeout(life, busyCheck)
			switch {
			case err == nil:
				failed = false
				heard = time.Now()
				w.dispatch(msg)
				continue
			case errors.Is(err, redis.ErrClosed) || life.Err() != nil:
				return
			case isTimeout(err): // silent: is the connection still there?
				if busy() || time.Since(heard) >= healthCheck {
					if w.probe(ps) {
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
// anything to arrive, which it dispatches. When nothing has come after
// lateAfter, every waiter of the Client tries (see waiters.recheck), and
// again every recheckEvery while nothing comes: a message may have been
// lost or be late. When nothing
// comes at all (a half-open connection: the PING went into a socket whose
// peer, or a NAT on the way, is gone), the read that gave up counts as a
// broken connection for go-redis (a read without an allowance for
// timeouts), which replaces it and subscribes every channel again on the
// next receive.
//
// It reports whether the connection answered.
func (w *waiters) probe(ps *redis.PubSub) bool {
	ctx, cancel := context.WithTimeout(w.c.life, pingTimeout)
	defer cancel()
	if ps.Ping(ctx) != nil {
		return false // go-redis reconnects after a failed write
	}
	msg, err := ps.ReceiveTimeout(ctx, lateAfter) // a timeout here keeps the connection
	for isTimeout(err) && ctx.Err() == nil {
		w.recheck()
		if d, _ := ctx.Deadline(); time.Until(d) <= recheckEvery+lateAfter {
			msg, err = ps.Receive(ctx) // the last read: one that gives up replaces the connection
			break
		}
		msg, err = ps.ReceiveTimeout(ctx, recheckEvery)
	}
	if err != nil {
		return false
	}
	w.dispatch(msg)
	return true
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
