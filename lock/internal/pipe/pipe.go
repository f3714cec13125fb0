// Package pipe sends the script calls of a lock Client to one Redis, and
// lets concurrent calls share round trips.
package pipe

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/scripts"
	"github.com/lockkit/lockkit/lock/internal/tasks"
)

// maxSenders is how many senders of one Client's script calls to one
// Redis may have a command or pipeline in flight before further calls
// wait for the next pipeline. Two: the calls that come during a round trip
// go in the next pipeline, and a call that comes while one round trip is
// under way still goes at once. With one, a release that hands a key over
// waited for the attempt of the waiter before it to come back: with 8 or 32
// goroutines of one Client on one key, 30% fewer acquisitions per second
// (6,800-7,100 against 9,500-10,000); many keys did not gain from one.
const maxSenders = 2

// stallAfter is how long the first call of the queue waits for the senders
// in flight before one more starts: so a call waits for other calls' round
// trips no longer than that, whether their connection stopped answering or
// Redis is far away. A healthy Redis nearby answers a pipeline of lock
// scripts sooner, so calls still share round trips under load. With 50 ms,
// a call behind two round trips of 100 ms waited up to 50 ms before its
// own: a 150 ms lease, whose validity the wait counts against, was not
// obtained by six concurrent callers within a second
// (TestCallsDoNotWaitForOtherRoundTrips).
const stallAfter = time.Millisecond

// A Pipe sends the script calls of one Client to one Redis, and lets
// concurrent calls share round trips; H is what a call's Replied is given
// (the lock's hold).
//
// A lone call (no other call of the Pipe under way) runs on its caller's
// goroutine when the Redis client stops a command at its context's
// deadline and within timeouts of its own (see boundsCalls): passing it to
// another goroutine and back cost each call two thread wake-ups, about
// half the system calls of an uncontended Lock and unlock. Such a call
// ends at its deadline as go-redis enforces it; when its context is
// cancelled without a deadline (Close, or the caller giving up) while
// Redis does not answer, it ends when go-redis gives up, within its read
// timeout; Close waits for it up to its own bound (see tasks.Runner.Enter).
//
// Otherwise, and for the calls that come while one is under way, a call
// queues; when fewer than
// maxSenders commands or pipelines are in flight, the call starts a sender,
// a goroutine of the Client's, which takes the whole queue and sends it,
// again and again until the queue is empty: a lone call as one command
// under its own context, as go-redis would send it, several as one
// pipeline. Under load a round trip then carries many calls, which saves
// the Client and Redis a system call or more per command. Calls leave in
// the order they came: a sender frees its slot only when the queue is
// empty, and a new one starts only then (or for a stall, below, which may
// send a call while an earlier one is still in flight on a slow
// connection: the janitor cleans up twice for a call cut short that Redis
// may run after its first cleanup; see docs/design.md, "The janitor").
//
// The caller waits for its reply in its own goroutine, until its context
// is done: so Redis calls keep their callers' deadlines however long
// go-redis takes, without a goroutine per call. A call whose context
// ended before a sender took it is not sent. A queue whose first call has
// waited stallAfter gets one more sender (see stallAfter).
//
// Pipelines run under the Client's background context (values only, never
// cancelled): a tracing hook of the Redis client sees one pipeline for the
// calls of several callers, outside their traces.
type Pipe[H any] struct {
	rdb   redis.UniversalClient
	tasks *tasks.Runner
	ctx   context.Context // of pipelines
	watch *time.Timer     // runs stalled when the queue's first call may have waited stallAfter
	flush func()          // p.sendAll, made once

	// requests holds requests for reuse. A request goes back once its
	// caller took its reply, never while a sender may still use it: one
	// whose caller left is dropped.
	requests sync.Pool

	mu       sync.Mutex
	queue    []*request[H]
	spare    []*request[H] // an empty queue whose array a sender gave back, for the next
	queuedAt time.Time     // when the queue's first call came
	senders  int           // a lone call on its caller's goroutine counts as one

	inline bool // a lone call runs on its caller's goroutine (see boundsCalls)
}

// A Replied acts on the reply of a script call for h as soon as it
// comes, in the goroutine that reads it (a sender of the pipe, or the
// call's own), before the caller sees it, and even when the caller has
// stopped waiting. It returns the wake channel of a waiter to signal, or
// nil, which is signalled just after the caller is told: Go's scheduler
// runs the goroutine made ready last first, so the waiter a release hands
// the key to runs before the releasing caller goes on, and releases
// sooner. Waking it before telling the caller cost a contended acquisition
// 6% more time (BenchmarkContended, 8 runs alternated, benchstat: 105.4
// against 99.4 µs).
type Replied[H any] func(h H, cmd *redis.Cmd) chan struct{}

// A request is one script call.
type request[H any] struct {
	ctx  context.Context
	s    scripts.Script
	args []any // in buf: EVALSHA, the hash, the number of keys, the keys, the arguments
	buf  [MaxArgs]any
	h    H
	then Replied[H] // run by the sender on the reply, if not nil
	cmd  *redis.Cmd
	done chan struct{} // capacity 1: signalled once cmd has its reply or error
}

// MaxArgs is the most arguments of a script call (acquire.lua's), with
// its command, hash and number of keys.
const MaxArgs = 13

// New returns a Pipe to rdb whose senders run in goroutines of t and whose
// pipelines run under background's values, never cancelled.
func New[H any](rdb redis.UniversalClient, t *tasks.Runner, background context.Context) *Pipe[H] {
	p := &Pipe[H]{rdb: rdb, tasks: t, ctx: context.WithoutCancel(background), inline: boundsCalls(rdb)}
	p.requests.New = func() any { return &request[H]{done: make(chan struct{}, 1)} }
	p.flush = p.sendAll
	p.watch = time.AfterFunc(time.Hour, p.stalled)
	p.watch.Stop()
	return p
}

// Run runs s with head, the call's first arguments ("", "", the number of
// keys and the keys, the first two left for the pipe to fill), then argv
// (see scripts.Script.Do), and returns its command, or one failed with
// ctx's error when ctx ends first; the command may then still run in
// Redis, if a sender had taken it. Together they are at most MaxArgs. The
// sender calls then, unless nil, with h on the reply before the caller
// sees it, and wakes the waiter it returns just after (see Replied). The
// command's arguments are not kept (the request that held them is used
// again): read only its reply.
func (p *Pipe[H]) Run(ctx context.Context, s scripts.Script, h H, then Replied[H], head, argv []any) *redis.Cmd {
	r := p.requests.Get().(*request[H])
	r.ctx, r.s, r.h, r.then = ctx, s, h, then
	r.args = append(append(r.buf[:0], head...), argv...)
	p.mu.Lock()
	if p.inline && p.senders == 0 && p.tasks.Enter() {
		p.senders++
		p.mu.Unlock()
		return p.runInline(r)
	}
	p.queue = append(p.queue, r)
	start := p.senders < maxSenders
	if start {
		p.senders++
	} else if len(p.queue) == 1 {
		p.queuedAt = time.Now()
		p.watch.Reset(stallAfter)
	}
	p.mu.Unlock()
	if start {
		p.start(ctx)
	}
	select {
	case <-r.done:
		return p.recycle(r)
	case <-ctx.Done():
		return failed(ctx, ctx.Err())
	}
}

// runInline sends r, a lone call, on its caller's goroutine, holding a
// sender's slot, which it passes to a sender for the calls that came
// meanwhile (once the Client is closed, to the stall timer's). A call whose context ended is not sent, and one that Redis
// did not answer before it ended fails with the context's error, as a
// queued one would.
func (p *Pipe[H]) runInline(r *request[H]) *redis.Cmd {
	ctx := r.ctx
	var wake chan struct{}
	if err := ctx.Err(); err != nil {
		r.cmd = failed(ctx, err)
	} else {
		r.cmd = r.s.Do(ctx, p.rdb, r.args)
		if r.then != nil {
			wake = r.then(r.h, r.cmd)
		}
	}
	cmd := p.recycle(r)
	p.mu.Lock()
	more := len(p.queue) > 0
	if !more {
		p.senders--
	}
	p.mu.Unlock()
	if more && !p.tasks.Run(p.flush) {
		// Closed: the caller, whose call is done, does not send the
		// others'; the stall timer starts a sender for them (see stalled).
		p.mu.Lock()
		p.senders--
		p.watch.Reset(0)
		p.mu.Unlock()
	}
	p.tasks.Leave()
	signal(wake)
	if cmd.Err() != nil && ctx.Err() != nil {
		return failed(ctx, ctx.Err())
	}
	return cmd
}

// recycle returns r's command and puts r back for another call.
func (p *Pipe[H]) recycle(r *request[H]) *redis.Cmd {
	cmd := r.cmd
	var none H
	r.ctx, r.args, r.h, r.then, r.cmd = nil, nil, none, nil, nil
	clear(r.buf[:])
	p.requests.Put(r)
	return cmd
}

// signal wakes the waiter of wake, if any and not woken already.
func signal(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// boundsCalls reports whether rdb, a client of one Redis, stops a command
// at its context's deadline (go-redis's ContextTimeoutEnabled) and, for a
// context without one, within its read and write timeouts: so a call sent
// on its caller's goroutine keeps the caller's deadline.
func boundsCalls(rdb redis.UniversalClient) bool {
	c, ok := rdb.(interface{ Options() *redis.Options })
	if !ok {
		return false
	}
	o := c.Options()
	return o.ContextTimeoutEnabled && o.ReadTimeout > 0 && o.WriteTimeout > 0
}

// failed is a command that failed with err before it was sent.
func failed(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// start runs a sender in a goroutine of the Client's. Once the Client is
// closed it sends here, unless ctx is done: the janitor's last cleanups
// run so, bounded by go-redis's timeouts.
func (p *Pipe[H]) start(ctx context.Context) {
	if p.tasks.Run(p.flush) {
		return
	}
	if ctx.Err() == nil {
		p.sendAll()
		return
	}
	p.mu.Lock()
	p.senders--
	p.mu.Unlock()
}

// stalled starts one more sender when the queue's first call has waited
// stallAfter: the senders in flight are stuck (see stallAfter). Otherwise
// it looks again when that call will have waited so long.
func (p *Pipe[H]) stalled() {
	p.mu.Lock()
	if len(p.queue) == 0 {
		p.mu.Unlock()
		return
	}
	if rest := stallAfter - time.Since(p.queuedAt); rest > 0 {
		p.watch.Reset(rest)
		p.mu.Unlock()
		return
	}
	p.senders++
	p.mu.Unlock()
	p.start(p.ctx)
}

// sendAll sends the queue until it is empty, then frees its sender's
// slot.
func (p *Pipe[H]) sendAll() {
	var sent []*request[H] // the last batch, whose array serves a later queue
	for {
		p.mu.Lock()
		if sent != nil && p.spare == nil {
			p.spare = sent[:0]
		}
		batch := p.queue
		p.queue, p.spare = p.spare, nil
		if len(batch) == 0 {
			p.senders--
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		live := batch[:0]
		for _, r := range batch {
			if err := r.ctx.Err(); err != nil { // its caller is gone
				r.cmd = failed(r.ctx, err)
				r.done <- struct{}{}
				continue
			}
			live = append(live, r)
		}
		switch len(live) {
		case 0:
		case 1:
			r := live[0]
			r.cmd = r.s.Do(r.ctx, p.rdb, r.args)
		default:
			p.send(live)
		}
		for _, r := range live {
			var wake chan struct{}
			if r.then != nil {
				wake = r.then(r.h, r.cmd)
			}
			r.done <- struct{}{} // from here on r may serve another call
			signal(wake)
		}
		clear(batch)
		sent = batch
	}
}

// send runs batch in one pipeline with EVALSHA, then the calls Redis did
// not know the script of in a second one with EVAL, which caches it.
func (p *Pipe[H]) send(batch []*request[H]) {
	eval := false
	for len(batch) > 0 {
		pl := p.rdb.Pipeline()
		for _, r := range batch {
			r.s.Command(r.args, eval)
			r.cmd = redis.NewCmd(r.ctx, r.args...)
			_ = pl.Process(p.ctx, r.cmd)
		}
		_, _ = pl.Exec(p.ctx) // each command keeps its own error
		if eval {
			return
		}
		eval = true
		again := batch[:0:0]
		for _, r := range batch {
			if redis.HasErrorPrefix(r.cmd.Err(), "NOSCRIPT") {
				again = append(again, r)
			}
		}
		batch = again
	}
}
