package leader_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// A span is a term as the replicas' events tell it: its replica, token,
// start, and the first and last times its lead context was seen live.
type span struct {
	id          int
	token       uint64
	start       time.Time
	first, last time.Time
}

// termProblems returns the terms of evs (start, live and other events of
// the replicas, see events) in order of start, and what is wrong with
// them: an event of no term, a term whose token is not above the one
// before's, or two terms seen live at overlapping times.
func termProblems(evs []event) ([]*span, []string) {
	var problems []string
	terms := map[uint64]*span{}
	for _, e := range evs {
		s := terms[e.token]
		if s == nil && e.kind == "start" {
			s = &span{id: e.id, token: e.token, start: e.at}
			terms[e.token] = s
		}
		if s == nil || s.id != e.id {
			problems = append(problems, fmt.Sprintf("event %+v: not of a term that started, or of another replica's", e))
			continue
		}
		if e.kind == "live" {
			if s.first.IsZero() {
				s.first = e.at
			}
			s.last = e.at
		}
	}
	var spans []*span
	for _, s := range terms {
		spans = append(spans, s)
	}
	slices.SortFunc(spans, func(a, b *span) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		a, b := spans[i-1], spans[i]
		if b.token <= a.token {
			problems = append(problems, fmt.Sprintf("term of c%d started after c%d's with token %d, not above %d", b.id, a.id, b.token, a.token))
		}
		if !a.last.IsZero() && !b.first.IsZero() && !b.first.After(a.last) {
			problems = append(problems, fmt.Sprintf("c%d (token %d) was seen live at %v, before c%d (token %d) was last seen live at %v: two leaders",
				b.id, b.token, b.first.Format(time.StampMicro), a.id, a.token, a.last.Format(time.StampMicro)))
		}
	}
	return spans, problems
}

// TestTermProblemsCatchesTwoLeaders: the fault test's check of the
// replicas' events finds two terms live at once, a token that does not
// rise, and an event of no term; and nothing in a clean history.
func TestTermProblemsCatchesTwoLeaders(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	clean := []event{
		{kind: "start", id: 0, token: 5, at: at(0)}, {kind: "live", id: 0, token: 5, at: at(1)}, {kind: "live", id: 0, token: 5, at: at(50)},
		{kind: "start", id: 1, token: 7, at: at(40)}, {kind: "live", id: 1, token: 7, at: at(60)},
	}
	if _, problems := termProblems(clean); len(problems) != 0 {
		t.Errorf("a clean history: %q", problems)
	}
	for _, tc := range []struct {
		name, want string
		evs        []event
	}{
		{"overlap", "two leaders", append(slices.Clone(clean[:4]), event{kind: "live", id: 1, token: 7, at: at(45)})},
		{"token", "not above", append(slices.Clone(clean[:3]), event{kind: "start", id: 1, token: 4, at: at(60)})},
		{"no term", "not of a term", append(slices.Clone(clean), event{kind: "live", id: 2, token: 9, at: at(70)})},
	} {
		_, problems := termProblems(tc.evs)
		if len(problems) != 1 || !strings.Contains(problems[0], tc.want) {
			t.Errorf("%s: %q, want one problem with %q", tc.name, problems, tc.want)
		}
	}
}
