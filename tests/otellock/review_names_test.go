package otellock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// TestLockNamesCappedConcurrently (review of issue 18): many goroutines
// bringing new names at once leave exactly the cap's number of names
// plus _OTHER, and the error handler hears of it once.
func TestLockNamesCappedConcurrently(t *testing.T) {
	errs := catchOtelErrors(t)
	tel := newTelemetry(t)
	const max, names, workers = 10, 200, 16
	obs := tel.observer(t, otellock.WithMaxLockNames(max))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				a := lock.Acquire{Key: "k", Name: "job-" + strconv.Itoa((i*7+w)%names)}
				ctx := obs.AcquireStarted(context.Background(), a)
				a.Outcome = lock.OutcomeBusy
				obs.AcquireEnded(ctx, a, nil)
			}
		}()
	}
	wg.Wait()

	m := tel.collect(t)
	seen := map[string]bool{}
	var total int64
	for _, set := range pointSets(m["lock.acquire.outcomes"]) {
		v, _ := set.Value(aName)
		seen[v.AsString()] = true
		total += m.value(t, "lock.acquire.outcomes", set.ToSlice()...)
	}
	if !seen["_OTHER"] || len(seen) != max+1 {
		t.Errorf("%d distinct lock.name values (_OTHER among them: %v), want %d names and _OTHER", len(seen), seen["_OTHER"], max)
	}
	if total != workers*names {
		t.Errorf("lock.acquire.outcomes total %d, want %d", total, workers*names)
	}
	errs.mu.Lock()
	defer errs.mu.Unlock()
	if len(errs.errs) != 1 {
		t.Errorf("error handler got %d errors, want 1: %v", len(errs.errs), errs.errs)
	}
}
