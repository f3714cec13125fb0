package otellock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// TestLockNamesCappedConcurrently: many goroutines
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

// TestRejectedNameIsNotRecorded ("every bad input gets a clear error and
// changes nothing"): a Lock whose lock.WithName is rejected with
// ErrInvalid (not UTF-8, or longer than lock.MaxNameLen) does not record
// that name: invalid UTF-8 in an attribute would make OTLP's protobuf
// encoding of every later export of that cumulative metric fail, and each
// rejected name would use up one place of the names cap.
func TestRejectedNameIsNotRecorded(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)
	bad := []string{"orders-\xff", strings.Repeat("n", lock.MaxNameLen+1)}
	for _, name := range bad {
		if _, _, err := locker.Lock(context.Background(), "orders:42", lock.WithName(name)); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("Lock with name of %d bytes: %v, want ErrInvalid", len(name), err)
		}
	}
	m := tel.collect(t)
	for _, set := range pointSets(m["lock.acquire.outcomes"]) {
		v, _ := set.Value(aName)
		if name := v.AsString(); !utf8.ValidString(name) || len(name) > lock.MaxNameLen {
			t.Errorf("lock.acquire.outcomes recorded the rejected lock.name %.40q (%d bytes)", name, len(name))
		}
	}
	for _, s := range tel.ended("lock.acquire") {
		if name := attr(t, s, aName).AsString(); !utf8.ValidString(name) || len(name) > lock.MaxNameLen {
			t.Errorf("lock.acquire span has the rejected lock.name %.40q (%d bytes)", name, len(name))
		}
	}
}

// TestInternalNamesDoNotUseUpTheCap: the locks integrations take for
// their own bookkeeping (lock.Integration.Internal, cronlock's tick markers) have
// a cap of their own. With a cap of 10, 10 internal names first leave
// room for 10 names of the user's own locks, none of which is recorded as
// _OTHER; an 11th internal name is, and a name used both ways is one name.
func TestInternalNamesDoNotUseUpTheCap(t *testing.T) {
	errs := catchOtelErrors(t)
	tel := newTelemetry(t)
	const max = 10
	obs := tel.observer(t, otellock.WithMaxLockNames(max))
	record := func(name string, internal bool) {
		a := lock.Acquire{Key: "k", Name: name, Internal: internal}
		ctx := obs.AcquireStarted(context.Background(), a)
		a.Outcome = lock.OutcomeBusy
		obs.AcquireEnded(ctx, a, nil)
	}
	for i := range max {
		record("cronlock-job-"+strconv.Itoa(i), true)
	}
	for i := range max {
		record("user-"+strconv.Itoa(i), false)
	}
	record("cronlock-job-0", false) // known already: not a new name
	m := tel.collect(t)
	seen := map[string]bool{}
	for _, set := range pointSets(m["lock.acquire.outcomes"]) {
		v, _ := set.Value(aName)
		seen[v.AsString()] = true
	}
	for i := range max {
		if n := "user-" + strconv.Itoa(i); !seen[n] {
			t.Errorf("the user's lock name %q is not recorded (after %d internal names): internal names used up the cap", n, max)
		}
	}
	if seen["_OTHER"] {
		t.Errorf("a lock was recorded as _OTHER with %d user names and %d internal names, each within the cap of %d", max, max, max)
	}
	record("cronlock-job-new", true)
	seen = map[string]bool{}
	for _, set := range pointSets(tel.collect(t)["lock.acquire.outcomes"]) {
		v, _ := set.Value(aName)
		seen[v.AsString()] = true
	}
	if !seen["_OTHER"] || seen["cronlock-job-new"] {
		t.Errorf("an internal name over the internal cap was recorded as itself (_OTHER seen: %v)", seen["_OTHER"])
	}
	errs.mu.Lock()
	defer errs.mu.Unlock()
	if len(errs.errs) != 1 {
		t.Errorf("error handler got %d errors, want 1 (the internal cap passed): %v", len(errs.errs), errs.errs)
	}
}
