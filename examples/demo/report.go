package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// report is what the run showed, and whether the invariants held.
type report struct {
	statuses  map[int]int    // answers per status; 0: no answer in time
	replayed  int            // 200s that replayed a payment's first answer
	idem      map[string]int // Idempotency-Key outcomes
	keysTwice int            // Idempotency-Keys whose payment ran more than once
	payments  int            // payments the clients made, retries not counted
	retried   int            // payments that took more than one request
	gaveUp    int            // payments not answered 200 within maxAttempts requests
	paid      int            // payments that paid (the other 200s: "already paid")
	orders    int
	badOrders []string // paid other than exactly once
	maxPaying int
	ticks     int             // cron ticks that ran
	twice     int             // cron ticks that ran more than once
	attempts  map[string]int  // cron attempts per outcome
	waits     []time.Duration // of lock.acquire spans
	lost      int             // lock.hold spans ended by a lost lease
	trace     []string        // one request's spans, indented
	leader    handOver        // the leader election's hand-over at the end
}

func newReport(orders map[string]bool, answers map[answer]int, payments []payment, s *shop, spans []sdktrace.ReadOnlySpan) *report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &report{statuses: map[int]int{}, payments: len(payments), orders: len(orders), maxPaying: s.maxPaying,
		attempts: s.attempts, idem: s.idem}
	for a, n := range answers {
		r.statuses[a.status] += n
		if a.replayed {
			r.replayed += n
		}
	}
	for _, n := range s.keyRuns {
		if n > 1 {
			r.keysTwice++
		}
	}
	for _, p := range payments {
		if p.attempts > 1 {
			r.retried++
		}
		if p.status != http.StatusOK {
			r.gaveUp++
		}
	}
	for _, n := range s.payments {
		r.paid += n
	}
	for id := range orders {
		if s.payments[id] != 1 {
			r.badOrders = append(r.badOrders, fmt.Sprintf("%s paid %d times", id, s.payments[id]))
		}
	}
	for _, n := range s.runs {
		r.ticks++
		if n > 1 {
			r.twice++
		}
	}
	for _, sp := range spans {
		switch sp.Name() {
		case "lock.acquire":
			r.waits = append(r.waits, sp.EndTime().Sub(sp.StartTime()))
		case "lock.hold":
			for _, e := range sp.Events() {
				if e.Name == "lock.lost" {
					r.lost++
				}
			}
		}
	}
	slices.Sort(r.waits)
	r.trace = sampleTrace(spans)
	return r
}

// ok reports whether every invariant held.
func (r *report) ok() bool {
	return r.onlyExpected() && r.gaveUp == 0 && r.orders > 0 && len(r.badOrders) == 0 && r.maxPaying == 1 && r.keysTwice == 0 &&
		r.ticks > 0 && r.twice == 0 && r.lost == 0 && r.leader.ok()
}

// onlyExpected reports whether every answer was 200, or a 409 or 503 that
// a client retries, or none within a first request's wait.
func (r *report) onlyExpected() bool {
	for status := range r.statuses {
		if status != http.StatusOK && status != http.StatusConflict && status != http.StatusServiceUnavailable && status != 0 {
			return false
		}
	}
	return true
}

func (r *report) print(w io.Writer) {
	check := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAILED"
	}
	var parts []string
	total := 0
	for _, status := range slices.Sorted(mapsKeys(r.statuses)) {
		total += r.statuses[status]
		parts = append(parts, fmt.Sprintf("%d %s: %d", status, statusText(status), r.statuses[status]))
	}
	fmt.Fprintf(w, "\nrequests     %d (%s)  %s: only 200, 409, 503 and time-outs\n", total, strings.Join(parts, ", "), check(r.onlyExpected()))
	fmt.Fprintf(w, "             of the 200s, %d paid an order, %d answered \"already paid\" and %d were replays\n",
		r.paid, r.statuses[http.StatusOK]-r.paid-r.replayed, r.replayed)
	if r.statuses[0] > 0 {
		fmt.Fprintf(w, "             no answer: a client stopped waiting for its first request and sent it again\n")
	}
	if r.statuses[http.StatusConflict] > 0 {
		fmt.Fprintf(w, "             409: another request was paying that order, or the retry's first request still ran\n")
	}
	if r.statuses[http.StatusServiceUnavailable] > 0 {
		fmt.Fprintf(w, "             503: the lock service did not answer in time (a busy host or Redis)\n")
	}
	fmt.Fprintf(w, "clients      %d payments, %d retried after a 409, 503 or time-out, %d not answered 200 within %d requests  %s\n",
		r.payments, r.retried, r.gaveUp, maxAttempts, check(r.gaveUp == 0))
	var idem []string
	for _, o := range slices.Sorted(mapsKeys(r.idem)) {
		idem = append(idem, fmt.Sprintf("%s %d", o, r.idem[o]))
	}
	fmt.Fprintf(w, "idempotency  %s\n", strings.Join(idem, ", "))
	fmt.Fprintf(w, "             (replayed: a retry got its payment's first answer; conflict: it came while that one ran)\n")
	fmt.Fprintf(w, "             Idempotency-Keys whose payment ran twice: %d  %s\n", r.keysTwice, check(r.keysTwice == 0))
	fmt.Fprintf(w, "orders       %d, each paid exactly once  %s\n", r.orders, check(r.orders > 0 && len(r.badOrders) == 0))
	for _, b := range r.badOrders[:min(len(r.badOrders), 5)] {
		fmt.Fprintf(w, "             %s\n", b)
	}
	fmt.Fprintf(w, "payments     at most %d of one order at a time  %s\n", r.maxPaying, check(r.maxPaying == 1))
	fmt.Fprintf(w, "cron         %d ticks run, %d of them more than once  %s\n", r.ticks, r.twice, check(r.ticks > 0 && r.twice == 0))
	var outcomes []string
	for _, o := range slices.Sorted(mapsKeys(r.attempts)) {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", o, r.attempts[o]))
	}
	fmt.Fprintf(w, "             attempts on all replicas: %s\n", strings.Join(outcomes, ", "))
	if len(r.waits) > 0 {
		fmt.Fprintf(w, "lock wait    p50 %v, p99 %v over %d acquisitions\n",
			percentile(r.waits, 0.50), percentile(r.waits, 0.99), len(r.waits))
	}
	fmt.Fprintf(w, "lost leases  %d  %s\n", r.lost, check(r.lost == 0))
	r.leader.print(w, check)
	if len(r.trace) > 0 {
		fmt.Fprintf(w, "\none payment's trace:\n%s", strings.Join(r.trace, ""))
	}
	fmt.Fprintf(w, "\n%s\n", map[bool]string{true: "PASS: every invariant held", false: "FAIL: an invariant did not hold"}[r.ok()])
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(p*float64(len(sorted)-1))].Round(10 * time.Microsecond)
}

func statusText(status int) string {
	if status == 0 {
		return "no answer"
	}
	return http.StatusText(status)
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// sampleTrace renders the spans of one paid order's request as a tree.
func sampleTrace(spans []sdktrace.ReadOnlySpan) []string {
	children := map[string][]sdktrace.ReadOnlySpan{}
	var root sdktrace.ReadOnlySpan
	for _, sp := range spans {
		children[sp.Parent().SpanID().String()] = append(children[sp.Parent().SpanID().String()], sp)
	}
	for _, sp := range spans {
		if sp.Name() == "pay" && sp.EndTime().Sub(sp.StartTime()) > 5*time.Millisecond {
			root = rootOf(sp, spans)
			break
		}
	}
	if root == nil {
		return nil
	}
	var lines []string
	var walk func(sdktrace.ReadOnlySpan, int)
	walk = func(sp sdktrace.ReadOnlySpan, depth int) {
		lines = append(lines, fmt.Sprintf("  %s%-28s %v\n", strings.Repeat("  ", depth), sp.Name(),
			sp.EndTime().Sub(sp.StartTime()).Round(10*time.Microsecond)))
		kids := children[sp.SpanContext().SpanID().String()]
		slices.SortFunc(kids, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	walk(root, 0)
	return lines
}

// rootOf follows sp's parents as far as the recorded spans go.
func rootOf(sp sdktrace.ReadOnlySpan, spans []sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
	}
	for {
		p, ok := byID[sp.Parent().SpanID().String()]
		if !ok {
			return sp
		}
		sp = p
	}
}
