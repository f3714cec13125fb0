package idempotency_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// window is when Redis was stopped (SIGSTOP) during a run; the zero
// window: it answered throughout.
type window struct{ from, to time.Time }

func (w window) zero() bool { return w.from.IsZero() }

// checkAnswers judges every answer of a run by its shape and phase (see
// checkAnswer), and every order by the bank and by its answers (see
// checkOrder). stall is when Redis was stopped: 503s must overlap it.
func checkAnswers(t *testing.T, b *bank, answers []answer, stall window) {
	t.Helper()
	byOrder := map[int][]answer{}
	for _, a := range answers {
		if err := checkAnswer(a, stall); err != nil {
			t.Errorf("%v: %v", a, err)
		}
		byOrder[a.order] = append(byOrder[a.order], a)
	}
	for o := 1; o <= orders; o++ {
		for _, err := range checkOrder(b, o, byOrder[o]) {
			t.Errorf("order %d: %v", o, err)
		}
	}
}

// checkAnswer judges one answer: its status is one its phase allows, a
// 503 came while Redis was stopped, and the headers and body fit the
// status.
func checkAnswer(a answer, stall window) error {
	if a.err != nil {
		if a.timeout != 0 && timedOut(a) {
			return nil // cut short by its client on purpose
		}
		return fmt.Errorf("transport error")
	}
	allowed := map[string][]int{
		phaseFirst:      {http.StatusCreated, http.StatusConflict},
		phaseAfterTO:    {http.StatusCreated, http.StatusConflict},
		phaseSettle:     {http.StatusCreated, http.StatusConflict},
		phaseCompleted:  {http.StatusCreated},
		phaseChangeBody: {http.StatusUnprocessableEntity},
		phaseChangePath: {http.StatusUnprocessableEntity},
	}[a.phase]
	if !stall.zero() {
		allowed = append(allowed, http.StatusServiceUnavailable)
	}
	if !slices.Contains(allowed, a.status) {
		return fmt.Errorf("status %d, want one of %v in phase %s", a.status, allowed, a.phase)
	}
	ct := a.header.Get("Content-Type")
	switch a.status {
	case http.StatusCreated:
		if ct != "application/json" || a.header.Get("Location") == "" {
			return fmt.Errorf("Content-Type %q, Location %q", ct, a.header.Get("Location"))
		}
		var rc receipt
		if err := json.Unmarshal(a.body, &rc); err != nil {
			return fmt.Errorf("receipt: %v", err)
		}
		if a.phase == phaseCompleted && !a.replayed() {
			return fmt.Errorf("not a replay after the order's answer was known")
		}
	case http.StatusServiceUnavailable:
		if a.got.Before(stall.from) || a.sent.After(stall.to) {
			return fmt.Errorf("503 outside Redis's stop %v (sent %v, answered %v after the stop)",
				stall.to.Sub(stall.from), a.sent.Sub(stall.from), a.got.Sub(stall.from))
		}
		fallthrough
	case http.StatusConflict:
		if s, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || s < 1 {
			return fmt.Errorf("Retry-After %q, want whole seconds >= 1", a.header.Get("Retry-After"))
		}
		fallthrough
	default:
		if !strings.HasPrefix(ct, "application/problem+json") {
			return fmt.Errorf("Content-Type %q, want application/problem+json", ct)
		}
	}
	return nil
}

// checkOrder judges one order: the bank ran and paid it exactly once and
// never ran the path its key was moved to; every 201 carries the same
// bytes and headers, naming the bank's payment; at most one 201 was not
// a replay, and exactly one when no request of the order timed out; each
// client ended with a 201, every retry after that with a replay, and
// each changed request with a 422.
func checkOrder(b *bank, o int, answers []answer) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	runs, paid := b.ledger(strconv.Itoa(o))
	if len(runs) != 1 || len(paid) != 1 {
		fail("bank: handler runs %v, payments %+v; want one each", runs, paid)
	}
	if moved, _ := b.ledger(strconv.Itoa(o + pathOffset)); len(moved) != 0 {
		fail("bank: the key on order %d's path ran its handler on %v", o+pathOffset, moved)
	}
	var ref *answer
	fresh, timeouts := 0, 0
	final := map[string]int{}
	for i, a := range answers {
		if timedOut(a) {
			timeouts++
		}
		switch a.status {
		case http.StatusCreated:
			if a.fresh() {
				fresh++
			}
			if a.phase == phaseFirst || a.phase == phaseAfterTO || a.phase == phaseSettle {
				final[phaseFirst]++
			} else {
				final[a.phase]++
			}
			if ref == nil {
				ref = &answers[i]
				continue
			}
			if !bytes.Equal(a.body, ref.body) || a.header.Get("Location") != ref.header.Get("Location") ||
				a.header.Get("Content-Type") != ref.header.Get("Content-Type") {
				fail("%v differs from %v", a, *ref)
			}
		case http.StatusUnprocessableEntity:
			final[a.phase]++
		}
	}
	if fresh > 1 || (fresh == 0 && timeouts == 0) {
		fail("%d answers of a handler run (not replayed), %d timeouts", fresh, timeouts)
	}
	want := map[string]int{phaseFirst: replicas, phaseCompleted: replicas, phaseChangeBody: 1, phaseChangePath: 1}
	for phase, n := range want {
		if final[phase] != n {
			fail("%d final answers in phase %s, want %d", final[phase], phase, n)
		}
	}
	if ref != nil && len(paid) == 1 {
		var rc receipt
		_ = json.Unmarshal(ref.body, &rc)
		if rc != (receipt{Order: strconv.Itoa(o), Payment: paid[0].ID, Replica: paid[0].Replica, Amount: 100 + o}) {
			fail("answer %+v, bank paid %+v", rc, paid[0])
		}
	}
	return errs
}

// tally counts answers by phase and status ("timeout" for a client's
// timeout, "+replay" marking replayed 201s), for the test's figures.
func tally(answers []answer) string {
	n := map[string]int{}
	for _, a := range answers {
		s := strconv.Itoa(a.status)
		switch {
		case timedOut(a):
			s = "timeout"
		case a.err != nil:
			s = "error"
		case a.replayed():
			s += "+replay"
		}
		n[a.phase+" "+s]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %d; ", k, n[k])
	}
	return b.String()
}

// count returns how many answers match.
func count(answers []answer, match func(answer) bool) int {
	n := 0
	for _, a := range answers {
		if match(a) {
			n++
		}
	}
	return n
}

// checkStallBound fails t for each answer to a request sent while Redis
// was stopped (stall) that took longer than the acquisition bound
// (httplock.DefaultAcquireTimeout) and 100 ms (scaled by
// locktest.Bound): no request waits out a stalled Redis. A run of the
// handler, slow by itself, is not bounded. It returns a figure: how many
// were answered, the slowest, and the slowest 503.
func checkStallBound(t *testing.T, answers []answer, stall window) string {
	t.Helper()
	limit := httplock.DefaultAcquireTimeout + locktest.Bound(100*time.Millisecond)
	n, over := 0, 0
	var slowest, slowest503 time.Duration
	for _, a := range answers {
		if a.sent.Before(stall.from) || a.sent.After(stall.to) || a.err != nil {
			continue
		}
		n++
		d := a.got.Sub(a.sent)
		slowest = max(slowest, d)
		if a.status == http.StatusServiceUnavailable {
			slowest503 = max(slowest503, d)
		}
		if d > limit && !a.fresh() {
			over++
			if over <= 5 {
				t.Errorf("%v: answered in %v (sent %v into Redis's stop), over the acquisition bound %v",
					a, d.Round(time.Millisecond), a.sent.Sub(stall.from).Round(time.Millisecond), limit)
			}
		}
	}
	if over > 5 {
		t.Errorf("%d answers in all over the acquisition bound %v", over, limit)
	}
	return fmt.Sprintf("%d answered, the slowest in %v, the slowest 503 in %v",
		n, slowest.Round(time.Millisecond), slowest503.Round(time.Millisecond))
}

// checkRedisKeys checks what the run left in Redis: one stored answer
// per order (a moved path's request stored none), each with a TTL within
// the retention (24 h by default), and, within a lease at most, no run
// lock held.
func checkRedisKeys(t *testing.T, f *fleet) {
	t.Helper()
	stored := answerKeys(f)
	if len(stored) != orders {
		t.Errorf("%d answers stored for %d orders", len(stored), orders)
	}
	for _, k := range stored {
		if ttl := f.redis.TTL(k); ttl <= 0 || ttl > httplock.DefaultRetention {
			t.Errorf("answer %s: TTL %v, want within the retention %v", k, ttl, httplock.DefaultRetention)
		}
	}
	locktest.Eventually(t, onceLease, "no run lock held", func() bool {
		for _, k := range f.redis.Keys() {
			if strings.HasPrefix(k, "lockkit:{") && strings.HasSuffix(k, "}") && f.redis.HGet(k, "n") > "0" {
				return false
			}
		}
		return true
	})
}

// checkLogs fails t when the replicas' logs carry a request's raw
// Idempotency-Key or a part of its body: the middleware logs neither.
func checkLogs(t *testing.T, f *fleet, answers []answer) {
	t.Helper()
	logs := f.logs()
	if strings.Contains(logs, `"amount"`) {
		t.Errorf("a request body in the replicas' logs")
	}
	seen := map[string]bool{}
	for _, a := range answers {
		if !seen[a.key] && strings.Contains(logs, a.key) {
			t.Errorf("the raw Idempotency-Key %q in the replicas' logs", a.key)
		}
		seen[a.key] = true
	}
}
