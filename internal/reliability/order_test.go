package reliability_test

import (
	"cmp"
	"fmt"
	"slices"
)

// overtakes checks the order in which the sections of a run entered
// against Redis's first-come-first-served wait queue: it returns the
// sections that entered before another whose Lock call began more than
// margin earlier, the first 5 described, and the longest such lead. A
// Lock call joins the queue with its first attempt, a round trip after it
// began, so margin only has to cover the time a loaded machine may take
// to send that attempt.
func overtakes(recs []record, margin int64) (n int, first []string, worst int64) {
	var secs []record
	for _, r := range recs {
		if r.Kind == "section" {
			secs = append(secs, r)
		}
	}
	slices.SortFunc(secs, func(a, b record) int { return cmp.Compare(b.Enter, a.Enter) })
	var waited record // of the sections entered later, the one whose Lock call began first
	for i, r := range secs {
		if i > 0 && (waited.Begin == 0 || secs[i-1].Begin < waited.Begin) {
			waited = secs[i-1]
		}
		if waited.Begin == 0 || r.Begin-waited.Begin <= margin {
			continue
		}
		n++
		worst = max(worst, r.Begin-waited.Begin)
		if len(first) < 5 {
			first = append(first, fmt.Sprintf("%s, whose Lock began %s later, entered %s before %s",
				who(r), ms(r.Begin-waited.Begin), ms(waited.Enter-r.Enter), who(waited)))
		}
	}
	return n, first, worst
}
