package locktest

import (
	"sync"
	"testing"
	"time"
)

// fakeTB records a failure instead of ending the test, so that the
// failing paths of the helpers can be checked.
type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(string, ...any) { f.failed = true; panic(f) }

// failed runs fn with a fakeTB and reports whether it failed.
func failed(t *testing.T, fn func(tb testing.TB)) bool {
	t.Helper()
	f := &fakeTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != any(f) {
				panic(r)
			}
		}()
		fn(f)
	}()
	return f.failed
}

func TestEventually(t *testing.T) {
	t.Parallel()
	start := time.Now()
	n := 0
	Eventually(t, time.Second, "third call", func() bool { n++; return n == 3 })
	if n != 3 || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("Eventually returned after %d calls, %v", n, time.Since(start))
	}
	if !failed(t, func(tb testing.TB) { Eventually(tb, 20*time.Millisecond, "never", func() bool { return false }) }) {
		t.Fatal("Eventually of a condition that never holds did not fail")
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	ch := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(ch) })
	if d := Within(t, ch, time.Second, "closed"); d < 5*time.Millisecond {
		t.Fatalf("Within returned after %v, before the channel closed", d)
	}
	if !failed(t, func(tb testing.TB) { Within(tb, make(chan struct{}), 20*time.Millisecond, "open") }) {
		t.Fatal("Within of a channel never closed did not fail")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	if ClosedWithin(Waited(&wg), 20*time.Millisecond) {
		t.Fatal("Waited closed before the WaitGroup was done")
	}
	wg.Done()
	if !ClosedWithin(Waited(&wg), time.Second) {
		t.Fatal("Waited not closed once the WaitGroup was done")
	}
}

func TestBoundAndLeast(t *testing.T) {
	t.Setenv(TimingEnv, "1")
	if !Tight() || Bound(time.Second) != time.Second || Least(20) != 20 {
		t.Fatalf("LOCKKIT_TIMING=1: Tight %v, Bound(1s) %v, Least(20) %d; want as written", Tight(), Bound(time.Second), Least(20))
	}
	t.Setenv(TimingEnv, "")
	if Tight() || Bound(time.Second) != busyScale*time.Second || Least(20) != 20/busyScale || Least(1) != 1 {
		t.Fatalf("without LOCKKIT_TIMING: Tight %v, Bound(1s) %v, Least(20) %d, Least(1) %d", Tight(), Bound(time.Second), Least(20), Least(1))
	}
}
