// Package tasks runs a lock Client's goroutines, reusing idle ones, and
// lets Close wait for them.
package tasks

import (
	"sync"
	"time"
)

// A goroutine of the Client's that finished its function waits up to
// idleWorker for another, and at most maxIdle wait at once.
const (
	idleWorker = 2 * time.Second
	maxIdle    = 4
)

// Runner runs the Client's goroutines and lets Close wait for them. A
// goroutine that finished its function waits for another for a while, so
// that the short Redis calls of steady traffic reuse goroutines whose
// stacks have grown instead of starting new ones.
type Runner struct {
	mu     sync.Mutex
	closed bool
	idle   int // goroutines waiting for work
	wg     sync.WaitGroup
	work   chan func() // unbuffered: taken by a goroutine waiting for work; closed by close
}

// New returns a Runner that runs functions until Close.
func New() *Runner {
	return &Runner{work: make(chan func())}
}

// Run runs f in a goroutine and reports true, or reports false once the
// Runner is closed.
func (t *Runner) Run(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	select {
	case t.work <- f:
		return true
	default:
	}
	t.wg.Add(1)
	go t.loop(f)
	return true
}

// loop runs f, then whatever run hands it while it waits, until it was
// idle for idleWorker, enough others wait, or the Runner closes. Its one
// timer is not reset for every function: when it fires early (the
// goroutine worked meanwhile) it is set again for the rest of the idle
// time.
func (t *Runner) loop(f func()) {
	defer t.wg.Done()
	var timer *time.Timer
	for ok := true; ok; {
		f()
		t.mu.Lock()
		if t.idle >= maxIdle {
			t.mu.Unlock()
			return
		}
		t.idle++
		t.mu.Unlock()
		idleSince := time.Now()
		if timer == nil {
			timer = time.NewTimer(idleWorker)
			defer timer.Stop()
		}
		f, ok = t.await(timer, idleSince)
		t.mu.Lock()
		t.idle--
		t.mu.Unlock()
	}
}

// await waits for a function to run, until the goroutine has been idle
// since idleSince for idleWorker or the Runner closes (ok false).
func (t *Runner) await(timer *time.Timer, idleSince time.Time) (f func(), ok bool) {
	for {
		select {
		case f, ok = <-t.work:
			return f, ok
		case <-timer.C:
			rest := idleWorker - time.Since(idleSince)
			if rest <= 0 {
				return nil, false
			}
			timer.Reset(rest)
		}
	}
}

// Enter counts work that runs on a caller's goroutine instead of one of
// the Runner's, so that Close waits for it as for the Runner's own; it
// reports false, counting nothing, once the Runner is closed. Leave ends
// what Enter counted.
func (t *Runner) Enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// Leave ends work that Enter counted.
func (t *Runner) Leave() { t.wg.Done() }

// Close stops new goroutines and waits up to limit for those running; it
// reports whether they all ended. One still waiting for a Redis that does
// not answer ends when the Redis client gives up. Close may be called
// more than once.
func (t *Runner) Close(limit time.Duration) bool {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.work)
	}
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}
