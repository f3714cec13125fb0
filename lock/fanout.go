package lock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errNodeTimeout marks a quorum node that did not answer within the node
// timeout.
var errNodeTimeout = errors.New("no answer within the node timeout")

// nodeResult is one node's answer to a fanned-out call.
type nodeResult[T any] struct {
	val T
	err error
}

// fanOut runs call on every node of c and returns the answers in node
// order. With a timeout of 0 (one node) the call runs inline with ctx.
// Otherwise the calls run in parallel, each bounded by timeout, and fanOut
// returns when all answered or timeout passed, counting the silent ones as
// failed with errNodeTimeout: their calls finish in the background, so a
// node that hangs cannot hold the caller past the timeout whatever the
// Redis client does with deadlines.
func fanOut[T any](c *Client, ctx context.Context, timeout time.Duration, call func(context.Context, *node) (T, error)) []nodeResult[T] {
	if timeout == 0 {
		v, err := call(ctx, c.nodes[0])
		return []nodeResult[T]{{v, err}}
	}
	type indexed struct {
		i int
		r nodeResult[T]
	}
	ch := make(chan indexed, len(c.nodes))
	for i, nd := range c.nodes {
		c.tasks.run(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v, err := call(cctx, nd)
			ch <- indexed{i, nodeResult[T]{v, err}}
		})
	}
	results := make([]nodeResult[T], len(c.nodes))
	for i := range results {
		results[i].err = errNodeTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for range c.nodes {
		select {
		case x := <-ch:
			results[x.i] = x.r
		case <-timer.C:
			return results
		}
	}
	return results
}

// tasks runs the Client's goroutines and lets Close wait for them.
type tasks struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// run starts f in a goroutine, or runs it inline once the Client is closed.
func (t *tasks) run(f func()) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		f()
		return
	}
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		f()
	}()
}

// close waits for every goroutine started by run.
func (t *tasks) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}
