package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errNodeTimeout marks a quorum node that did not answer within the node
// timeout; it matches [context.DeadlineExceeded].
var errNodeTimeout = fmt.Errorf("no answer within the node timeout: %w", context.DeadlineExceeded)

// errNotWaited marks a quorum node whose answer was not waited for: a
// quorum had confirmed the call already. Its command goes on.
var errNotWaited = errors.New("not waited for: a quorum had confirmed")

// errNodeDown marks a quorum node that was not called because it failed
// repeatedly and its back-off has not passed (see node.available).
var errNodeDown = errors.New("skipped: the node failed repeatedly")

// nodeResult is one node's answer to a fanned-out call.
type nodeResult[T any] struct {
	val T
	err error
}

// fanOut runs call on every node of c and returns the answers in node
// order, or when ctx is done: a node that has not answered by then counts
// as failed with ctx's error. With a timeout (quorum mode) each node's call
// is also bounded by it, and a node silent for longer counts as failed with
// errNodeTimeout. In quorum mode, yes, when given, tells an answer that
// counts toward the quorum: fanOut returns as soon as a quorum of yes has
// come (the nodes not waited for count as errNotWaited), and nodes that
// failed repeatedly are not called for a while (errNodeDown). Calls still under way go on in the background until
// the Redis client gives up, so no caller waits past its deadline whatever
// the Redis client does with deadlines.
//
// With one node and no timeout, a context that can never be done runs the
// call in the caller's goroutine.
func fanOut[T any](c *Client, ctx context.Context, timeout time.Duration, call func(context.Context, *node) (T, error), yes func(T) bool) []nodeResult[T] {
	if timeout == 0 && ctx.Done() == nil {
		v, err := call(ctx, c.nodes[0])
		return []nodeResult[T]{{v, err}}
	}
	type indexed struct {
		i int
		r nodeResult[T]
	}
	quorum := len(c.nodes) > 1
	ch := make(chan indexed, len(c.nodes))
	results := make([]nodeResult[T], len(c.nodes))
	pending := 0
	ayes := 0 // answers that count toward the quorum
	for i, nd := range c.nodes {
		if quorum && !nd.available() {
			results[i].err = errNodeDown
			continue
		}
		started := c.tasks.run(func() {
			cctx, cancel := ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				cctx, cancel = context.WithTimeout(ctx, timeout)
			}
			defer cancel()
			v, err := call(cctx, nd)
			if quorum && ctx.Err() == nil {
				nd.observe(err)
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
	// Only a quorum of yes ends the wait early. A call that did not win
	// waits for every node it called, so that what the caller sends next
	// (releasing a minority, trying again with the same owner) reaches
	// each node after this call's command, never before it.
	decided := func() bool { return quorum && yes != nil && ayes >= c.quorum }
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
// run with node.run. With one node that has a pipe, which bounds each wait
// by ctx itself, the call runs in the caller's goroutine: a Redis command
// then costs no goroutine of its own.
func fanOutScripts[T any](c *Client, ctx context.Context, timeout time.Duration, call func(context.Context, *node) (T, error), yes func(T) bool) []nodeResult[T] {
	if len(c.nodes) == 1 && c.nodes[0].pipe != nil {
		v, err := call(ctx, c.nodes[0])
		return []nodeResult[T]{{v, err}}
	}
	return fanOut(c, ctx, timeout, call, yes)
}
