package lock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// renewChunk is how many leases one renew.lua call extends on a single
// Redis. On Redis Cluster each call carries one lease (keys of different
// locks live in different slots); the pipeline still sends all calls to a
// node in one round trip.
const renewChunk = 200

// watchdog is the one renewal loop of a Client. It also keeps the registry
// of live holds, so Close can end them.
type watchdog struct {
	c      *Client
	mu     sync.Mutex
	holds  map[*hold]time.Time // live hold -> next renewal (zero: none)
	closed bool
	kick   chan struct{}
}

func newWatchdog(c *Client) *watchdog {
	return &watchdog{c: c, holds: make(map[*hold]time.Time), kick: make(chan struct{}, 1)}
}

// interval is how often a lease is renewed: a third of it, so two more
// renewals can fail before the validity ends.
func interval(h *hold) time.Duration { return h.lease / 3 }

// add registers a hold whose lease was set at sent. It reports false when
// the Client is closed.
func (w *watchdog) add(h *hold, sent time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	var at time.Time
	if !h.fixed {
		at = sent.Add(interval(h))
	}
	w.holds[h] = at
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return true
}

func (w *watchdog) remove(h *hold) {
	w.mu.Lock()
	delete(w.holds, h)
	w.mu.Unlock()
}

// closeAll ends every live hold with ErrClosed.
func (w *watchdog) closeAll() {
	w.mu.Lock()
	w.closed = true
	holds := make([]*hold, 0, len(w.holds))
	for h := range w.holds {
		holds = append(holds, h)
	}
	w.mu.Unlock()
	for _, h := range holds {
		h.mu.Lock()
		h.endLocked(ErrClosed)
		h.mu.Unlock()
	}
}

func (w *watchdog) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		batch, next := w.due(time.Now())
		if len(batch) > 0 {
			w.renew(batch)
			continue
		}
		t.Reset(next)
		select {
		case <-w.c.life.Done():
			return
		case <-w.kick:
		case <-t.C:
		}
	}
}

// due returns the holds to renew now and how long until the next one is
// due. A lease due within an eighth of its interval is renewed with the
// batch, so holds taken at different moments share round trips. Holds
// whose outermost caller's context is done are no longer renewed.
func (w *watchdog) due(now time.Time) ([]*hold, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var batch []*hold
	next := time.Hour
	for h, at := range w.holds {
		if at.IsZero() {
			continue
		}
		if h.parent.Err() != nil {
			w.holds[h] = time.Time{}
			continue
		}
		d := at.Sub(now)
		if d <= interval(h)/8 {
			batch = append(batch, h)
			continue
		}
		next = min(next, d)
	}
	return batch, next
}

// renew extends the leases of batch in one pipeline.
func (w *watchdog) renew(batch []*hold) {
	sent := time.Now()
	timeout := time.Hour
	for _, h := range batch {
		timeout = min(timeout, interval(h))
	}
	ctx, cancel := context.WithTimeout(w.c.life, timeout)
	alive, err := w.c.renewLeases(ctx, batch)
	cancel()
	lost := 0
	if err == nil {
		for i, h := range batch {
			if !alive[i] {
				lost++
			}
			h.renewed(sent, alive[i])
		}
	}
	w.mu.Lock()
	for _, h := range batch {
		if _, ok := w.holds[h]; !ok {
			continue
		}
		if err != nil {
			w.holds[h] = time.Now().Add(interval(h) / 4) // retry sooner
		} else {
			w.holds[h] = sent.Add(interval(h))
		}
	}
	w.mu.Unlock()
	if o := w.c.cfg.observer; o != nil {
		o.Renewed(Renewal{Leases: len(batch), Lost: lost, Err: err, Duration: time.Since(sent)})
	}
}

// renewLeases runs renew.lua over batch in one pipeline and reports, per
// hold, whether its owner still held the key.
func (c *Client) renewLeases(ctx context.Context, batch []*hold) ([]bool, error) {
	chunk := renewChunk
	if c.sharded {
		chunk = 1
	}
	run := func() ([]*redis.Cmd, error) {
		pipe := c.rdb.Pipeline()
		var cmds []*redis.Cmd
		for lo := 0; lo < len(batch); lo += chunk {
			part := batch[lo:min(lo+chunk, len(batch))]
			keys := make([]string, len(part))
			args := make([]any, 0, 2*len(part))
			for i, h := range part {
				keys[i] = h.rk.lock
				args = append(args, h.owner, h.lease.Milliseconds())
			}
			cmds = append(cmds, renewScript.EvalSha(ctx, pipe, keys, args...))
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := run()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = renewScript.Load(ctx, c.rdb).Err(); err == nil {
			cmds, err = run()
		}
	}
	if err != nil {
		return nil, err
	}
	alive := make([]bool, 0, len(batch))
	for _, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if err != nil {
			return nil, err
		}
		for _, x := range v {
			alive = append(alive, x == 1)
		}
	}
	if len(alive) != len(batch) {
		return nil, fmt.Errorf("lock: renew: %d replies for %d leases", len(alive), len(batch))
	}
	return alive, nil
}
