package main

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// errLost marks a release that found the lock no longer its own: its
// lease lapsed while held (or a retried command already released it). The
// adapters wrap their library's error for this case with it. A run counts
// these instead of failing: they are a result.
var errLost = errors.New("lock lost while held")

// lostBecause wraps a library's error for a lost lock.
func lostBecause(err error) error { return fmt.Errorf("%w: %w", errLost, err) }

// losses counts the lost locks of a run and keeps the first error.
type losses struct {
	n     atomic.Int64
	first atomic.Pointer[error]
}

// check counts err if it reports a lost lock and returns it otherwise.
func (l *losses) check(err error) error {
	if !errors.Is(err, errLost) {
		return err
	}
	if l.n.Add(1) == 1 {
		l.first.Store(&err)
	}
	return nil
}

func (l *losses) count() float64 { return float64(l.n.Load()) }

// note describes the losses for a table's detail line; "" when none.
func (l *losses) note() string {
	if l.n.Load() == 0 {
		return ""
	}
	return fmt.Sprintf("%d lock(s) lost while held, first: %v", l.n.Load(), *l.first.Load())
}
