package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockkit/lockkit/lock/internal/tasks"
)

// errNodeTimeout marks a node that did not answer within the node
// timeout; it matches [context.DeadlineExceeded].
var errNodeTimeout = fmt.Errorf("no answer within the node timeout: %w", context.DeadlineExceeded)

// errNotWaited marks a node whose answer was not waited for: enough
// nodes had confirmed the call already. Its command goes on.
var errNotWaited = errors.New("not waited for: a quorum had confirmed")

// errNodeDown marks a node that was not called because it failed
// repeatedly and its back-off has not passed (see health.Tracker.Available).
var errNodeDown = errors.New("skipped: the node failed repeatedly")

// nodeResult is one node's answer to a fanned-out call.
type nodeResult[T any] struct {
	val T
	err error
}

// A nodeSet is the Redis nodes a backend writes a lock to, and how many of
// them must confirm a call: the one node, or a majority of independent
// masters.
type nodeSet struct {
	nodes []*node
	need  int           // answers that confirm a call
	tasks *tasks.Runner // the Client's goroutines, which run the calls
	// inline is the one node when it has a pipe, which bounds each wait by
	// the call's context itself: a call then runs in the caller's
	// goroutine (see fanOutScripts). Nil otherwise.
	inline *node
}

// won reports whether enough nodes confirmed.
func (s *nodeSet) won(v votes) bool { return v.yes >= s.need }

// lost reports whether so many nodes no longer have the owner that enough
// of them can never confirm it again.
func (s *nodeSet) lost(v votes) bool { return v.no > len(s.nodes)-s.need }

// settled reports whether enough nodes answered, either way, to know that
// the owner blocks nothing once the rest lapse.
func (s *nodeSet) settled(v votes) bool { return v.yes+v.no >= s.need }

// votes tallies the nodes' answers about one hold.
type votes struct {
	yes  int     // confirmed
	no   int     // the owner's hold was gone
	errs []error // failed or silent nodes
}

// tally counts the answers of a call whose answer tells, per node,
// whether it confirmed (ok) or found the owner's hold gone.
func tally[T any](rs []nodeResult[T], ok func(T) bool) votes {
	var v votes
	for _, r := range rs {
		switch {
		case r.err != nil:
			v.errs = append(v.errs, r.err)
		case ok(r.val):
			v.yes++
		default:
			v.no++
		}
	}
	return v
}

// fanOut runs call on every node of s and returns the answers in node
// order, or when ctx is done: a node that has not answered by then counts
// as failed with ctx's error. With a timeout each node's call is also
// bounded by it, and a node silent for longer counts as failed with
// errNodeTimeout. yes, when given, tells an answer that counts toward the
// set's need: fanOut returns as soon as that many have come (the nodes not
// waited for count as errNotWaited). A node whose health is tracked and
// that failed repeatedly is not called for a while (errNodeDown). Calls
// still under way go on in the background until the Redis client gives
// up, so no caller waits past its deadline whatever the Redis client does
// with deadlines.
//
// Without a timeout, a context that can never be done runs the calls in
// the caller's goroutine.
func fanOut[T any](s *nodeSet, ctx context.Context, timeout time.Duration, call func(context.Context, *node) (T, error), yes func(T) bool) []nodeResult[T] {
	results := make([]nodeResult[T], len(s.nodes))
	if timeout == 0 && ctx.Done() == nil {
		for i, nd := range s.nodes {
			results[i].val, results[i].err = call(ctx, nd)
		}
		return results
	}
	type indexed struct {
		i int
		r nodeResult[T]
	}
	ch := make(chan indexed, len(s.nodes))
	pending := 0
	ayes := 0 // answers that count toward the need
	for i, nd := range s.nodes {
		if !nd.health.Available() {
			results[i].err = errNodeDown
			continue
		}
		started := s.tasks.Run(func() {
			cctx, cancel := ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				cctx, cancel = context.WithTimeout(ctx, timeout)
			}
			defer cancel()
			v, err := call(cctx, nd)
			if ctx.Err() == nil {
				nd.health.Observe(err)
			}
			ch <- indexed{i, nodeResult[T]{v, err}}
		})
		if started {
			results[i].err = errNodeTimeout
			pending++
		} else if err := ctx.Err(); err != nil {
			results[i].err = err // closed, and the caller gave up
		} else { // closed: the janitor's last cleanups run here
			v, err := call(ctx, nd)
			results[i] = nodeResult[T]{v, err}
		}
	}
	// Only the need of yes ends the wait early. A call that did not win
	// waits for every node it called, so that what the caller sends next
	// (releasing a minority, trying again with the same owner) reaches
	// each node after this call's command, never before it.
	decided := func() bool { return yes != nil && ayes >= s.need }
	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	for ; pending > 0 && !decided(); pending-- {
		select {
		case x := <-ch:
			results[x.i] = x.r
			if x.r.err == nil && yes != nil && yes(x.r.val) {
				ayes++
			}
		case <-expired:
			return results
		case <-ctx.Done():
			for i := range results {
				if results[i].err == errNodeTimeout {
					results[i].err = ctx.Err()
				}
			}
			return results
		}
	}
	for i := range results {
		if pending > 0 && results[i].err == errNodeTimeout {
			results[i].err = errNotWaited
		}
	}
	return results
}

// fanOutScripts is fanOut for a call whose only Redis commands are scripts
// run with node.run. On a set's inline node the call runs in the caller's
// goroutine: a Redis command then costs no goroutine of its own.
func fanOutScripts[T any](s *nodeSet, ctx context.Context, timeout time.Duration, call func(context.Context, *node) (T, error), yes func(T) bool) []nodeResult[T] {
	return fanOutWith(s, ctx, timeout, func(ctx context.Context, nd *node, _ struct{}) (T, error) { return call(ctx, nd) }, struct{}{}, yes, nil)
}

// fanOutWith is fanOutScripts for run with arg, the answers in room when it
// is large enough: on the inline node (the common path of a lock) it
// allocates nothing, neither a closure nor the answers.
func fanOutWith[T, A any](s *nodeSet, ctx context.Context, timeout time.Duration, run func(context.Context, *node, A) (T, error), arg A, yes func(T) bool, room []nodeResult[T]) []nodeResult[T] {
	if s.inline != nil {
		rs := append(room[:0], nodeResult[T]{})
		rs[0].val, rs[0].err = run(ctx, s.inline, arg)
		return rs
	}
	return fanOut(s, ctx, timeout, func(ctx context.Context, nd *node) (T, error) { return run(ctx, nd, arg) }, yes)
}
