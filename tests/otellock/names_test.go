package otellock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// handled collects what is passed to the OpenTelemetry error handler
// while a test runs.
type handled struct {
	mu   sync.Mutex
	errs []error
}

func (h *handled) Handle(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, err)
}

func catchOtelErrors(t *testing.T) *handled {
	h := &handled{}
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(h)
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return h
}

// TestLockNamesCapped: past the cap, new names are recorded as _OTHER,
// names seen before keep theirs, and the error handler hears of it once.
func TestLockNamesCapped(t *testing.T) {
	errs := catchOtelErrors(t)
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb, otellock.WithMaxLockNames(3))
	lockAs := func(name string) {
		_, unlock := locktest.MustLock(t, locker, context.Background(), "k", lock.WithName(name))
		_ = unlock()
	}
	for i := range 6 {
		lockAs("job-" + strconv.Itoa(i))
	}
	lockAs("job-1") // seen before the cap was reached
	lockAs("_OTHER")

	m := tel.collect(t)
	got := map[string]int64{}
	for _, set := range pointSets(m["lock.acquire.outcomes"]) {
		v, _ := set.Value(aName)
		got[v.AsString()] += m.value(t, "lock.acquire.outcomes", set.ToSlice()...)
	}
	want := map[string]int64{"job-0": 1, "job-1": 2, "job-2": 1, "_OTHER": 4}
	if len(got) != len(want) {
		t.Errorf("lock.acquire.outcomes by name: %v, want %v", got, want)
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("lock.acquire.outcomes{lock.name=%s} = %d, want %d", name, got[name], n)
		}
	}
	errs.mu.Lock()
	defer errs.mu.Unlock()
	if len(errs.errs) != 1 || !strings.Contains(errs.errs[0].Error(), "more than 3 distinct lock names") {
		t.Errorf("error handler got %v, want one error about the cap", errs.errs)
	}
}

// TestLockNameSources: a name given with lock.WithName wins over the name
// function, which names the others; an empty result is _OTHER.
func TestLockNameSources(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb, otellock.WithLockName(func(key string) string {
		if key == "anonymous" {
			return ""
		}
		return "fn:" + key
	}))
	for _, c := range []struct{ key, name string }{{"a", "orders:{id}"}, {"b", ""}, {"anonymous", ""}} {
		var opts []lock.LockOption
		if c.name != "" {
			opts = append(opts, lock.WithName(c.name))
		}
		_, unlock := locktest.MustLock(t, locker, context.Background(), c.key, opts...)
		_ = unlock()
	}
	var names []string
	for _, s := range tel.ended("lock.hold") {
		names = append(names, attr(t, s, aName).AsString())
	}
	if strings.Join(names, " ") != "orders:{id} fn:b _OTHER" {
		t.Errorf("lock.hold names %q, want [orders:{id} fn:b _OTHER]", names)
	}
}

func TestWithMaxLockNamesRejectsZero(t *testing.T) {
	if _, err := otellock.New(otellock.WithMaxLockNames(0)); err == nil || !strings.Contains(err.Error(), "WithMaxLockNames(0)") {
		t.Errorf("New(WithMaxLockNames(0)): %v, want an error naming it", err)
	}
}
