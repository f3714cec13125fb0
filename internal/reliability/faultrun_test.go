package reliability_test

import (
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/lockkit/lockkit/internal/redistest"
)

// faultRun is one run of the workload with every worker dialing Redis
// through a proxy of its own, and a fault injected while it runs.
type faultRun struct {
	srv     *redistest.Server
	proxies []*toxiproxy.Proxy // proxies[i] carries worker i's connections
	fleet   *fleet
	lease   time.Duration
	long    time.Duration // how long worker 0's long section holds
	windows []window      // when the fault was in effect
	restart int64         // when Redis was stopped, if it was restarted
}

// A window is a time a fault was in effect on one worker's proxy, or on
// all of them (worker -1).
type window struct {
	worker     int
	start, end int64
}

// sleep waits d, or until the workers finished: then it reports false.
func (r *faultRun) sleep(d time.Duration) bool {
	select {
	case <-r.fleet.done:
		return false
	case <-time.After(d):
		return true
	}
}

// spikes applies the toxic x(i) to every proxy for on, then none for off,
// for i = 0, 1, ... until the workers finish.
func (r *faultRun) spikes(t *testing.T, x func(i int) toxic, on, off time.Duration) {
	t.Helper()
	for i := 0; ; i++ {
		tx := x(i)
		r.apply(t, -1, tx)
		start := now()
		more := r.sleep(on)
		r.remove(t, -1, tx.Name)
		r.windows = append(r.windows, window{-1, start, now()})
		if !more || !r.sleep(off) {
			return
		}
	}
}

// apply adds x to the proxy of worker w, or to all for w < 0.
func (r *faultRun) apply(t *testing.T, w int, x toxic) {
	t.Helper()
	for i, p := range r.proxies {
		if w < 0 || i == w {
			if err := addToxic(p, x); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// remove removes the toxic name from the proxy of worker w, or from all
// for w < 0.
func (r *faultRun) remove(t *testing.T, w int, name string) {
	t.Helper()
	for i, p := range r.proxies {
		if w < 0 || i == w {
			if err := removeToxic(p, name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// awaitLong waits until worker 0 is inside its long section.
func (r *faultRun) awaitLong(t *testing.T) record {
	t.Helper()
	select {
	case rec := <-r.fleet.long:
		return rec
	case <-r.fleet.done:
		t.Fatal("the workers finished without a long section")
	case <-time.After(30 * time.Second):
		t.Fatal("no long section within 30 s")
	}
	return record{}
}

// underFault counts the sections that were under way, at least in part,
// while their worker's connection was under the fault.
func (r *faultRun) underFault(recs []record) int {
	n := 0
	for _, rec := range recs {
		for _, w := range r.windows {
			if rec.Kind == "section" && (w.worker < 0 || rec.Worker == w.worker) && rec.Enter < w.end && rec.Exit > w.start {
				n++
				break
			}
		}
	}
	return n
}

// recovery is the longest time, after the end of a fault window, until a
// worker it hit completed a section again.
func (r *faultRun) recovery(recs []record) int64 {
	var worst int64
	for _, w := range r.windows {
		first := int64(-1)
		for _, rec := range recs {
			if rec.Done && (w.worker < 0 || rec.Worker == w.worker) && rec.Enter > w.end && (first < 0 || rec.Enter < first) {
				first = rec.Enter
			}
		}
		if first > 0 {
			worst = max(worst, first-w.end)
		}
	}
	return worst
}

// checkCounter compares the counter with the sections that incremented it
// since Redis last started empty: every section done must be counted, and
// at most the failed ones may have been counted besides (their SET may
// have run before its reply or the lease was lost).
func (r *faultRun) checkCounter(t *testing.T, recs []record) {
	t.Helper()
	done, failed := 0, 0
	for _, rec := range recs {
		if rec.Kind != "section" || rec.Enter < r.restart {
			continue
		}
		if rec.Done {
			done++
		} else {
			failed++
		}
	}
	if got := counter(t, r.srv.Addr); got < done || got > done+failed {
		t.Errorf("counter = %d, want %d sections done (+ up to %d failed)", got, done, failed)
	}
}

// longSection returns worker 0's long section and the section entered
// next.
func longSection(t *testing.T, recs []record) (long, next record) {
	t.Helper()
	for _, rec := range recs {
		if rec.Kind == "section" && rec.Worker == 0 && rec.Client == 0 && (long.Enter == 0 || rec.Enter < long.Enter) {
			long = rec
		}
	}
	for _, rec := range recs {
		if rec.Kind == "section" && rec.Enter > long.Enter && (next.Enter == 0 || rec.Enter < next.Enter) {
			next = rec
		}
	}
	if long.Enter == 0 || next.Enter == 0 {
		t.Fatal("no long section, or none after it")
	}
	return long, next
}
