package reliability_test

import (
	"slices"
	"strings"
	"testing"
)

// at is a CLOCK_MONOTONIC time in the hand-made histories below: ms
// milliseconds after an arbitrary start.
func at(ms int64) int64 { return 1e9 + ms*1e6 }

// sec is a section of worker w with fencing token tok that entered at
// enter ms, wrote both stores at write ms and left at exit ms, its lock
// context live throughout.
func sec(w int, tok uint64, enter, write, exit int64) record {
	return record{Kind: "section", Worker: w, Token: tok, Fenced: true, Begin: at(enter - 1), Enter: at(enter),
		Write: at(write), Exit: at(exit), Live: true, Done: true, Set: true, FenceSet: true}
}

// lostAt is r told of the loss of its lease at ms.
func lostAt(r record, ms int64) record {
	r.Lost, r.Live, r.Done, r.Cause = at(ms), false, false, "lock: lease lost"
	return r
}

// refused is r whose write the fenced store refused.
func refused(r record) record {
	r.FenceSet = false
	return r
}

// paused is r frozen by the test inside its section.
func paused(r record) record {
	r.Paused = true
	return r
}

// TestAnalyse runs the checker of the multi-process tests on hand-made
// histories, each with the values the stores would hold after it: every
// kind of violation must be reported, and nothing else.
func TestAnalyse(t *testing.T) {
	t.Parallel()
	a, b, c := sec(0, 1, 0, 8, 10), sec(1, 2, 12, 18, 20), sec(2, 3, 22, 28, 30)
	for _, tc := range []struct {
		name            string
		recs            []record
		counter, fenced int      // the stores' values at the end
		want            []string // the problems reported, by their beginnings
	}{
		{name: "serial", recs: []record{c, a, b}, counter: 3, fenced: 3},
		{name: "loss seen before the next entry", recs: []record{lostAt(sec(0, 1, 0, 8, 15), 11), b, c}, counter: 3, fenced: 3},
		{
			name: "overlap", recs: []record{a, sec(1, 2, 9, 18, 20), c}, counter: 3, fenced: 3,
			want: []string{"overlapping sections: section of worker 1 client 0 (token 2) entered 1.0 ms before section of worker 0"},
		},
		{
			// The holder's context was live until 13 ms: the next one entered
			// inside it, and the holder was told too late.
			name: "loss seen late", recs: []record{lostAt(sec(0, 1, 0, 8, 15), 13), b, c}, counter: 3, fenced: 3,
			want: []string{"overlapping sections", "losses seen too late: section of worker 0 client 0 (token 1) saw its loss 1.0 ms after"},
		},
		{
			// Told of the loss in time, the holder wrote anyway at 14 ms; the
			// next holder had read the counter before: 1 increment lost.
			name: "stale write taken", recs: []record{lostAt(sec(0, 1, 0, 14, 15), 11), b, c}, counter: 2, fenced: 2,
			want: []string{
				"counter: 1 increments lost", "fenced store: 1 increments lost",
				"stale writes taken by the counter: section of worker 0 client 0 (token 1) wrote 2.0 ms after section of worker 1",
				"stale writes taken by the fenced store",
			},
		},
		{
			name: "stale write refused by the fenced store", recs: []record{refused(lostAt(sec(0, 1, 0, 14, 15), 11)), b, c}, counter: 2, fenced: 2,
			want: []string{"counter: 1 increments lost", "stale writes taken by the counter", "writes of holders not frozen refused by the fenced store"},
		},
		{
			name: "token repeated", recs: []record{a, sec(1, 1, 12, 18, 20), sec(2, 2, 22, 28, 30)}, counter: 3, fenced: 3,
			want: []string{"fencing tokens out of order: section of worker 1 client 0 (token 1) got token 1 after 1"},
		},
		{
			// As from a Redis restarted empty that started its tokens again:
			// they must grow across restarts too.
			name: "token lower", recs: []record{sec(0, 100, 0, 8, 10), b, c}, counter: 3, fenced: 3,
			want: []string{"fencing tokens out of order: section of worker 1 client 0 (token 2) got token 2 after 100"},
		},
		{
			name: "write of a live holder refused", recs: []record{a, b, refused(c)}, counter: 3, fenced: 2,
			want: []string{"writes of holders not frozen refused by the fenced store: section of worker 2 client 0 (token 3) wrote with token 3"},
		},
		{
			// A write the counter took that no section recorded.
			name: "more in the counter than written", recs: []record{a, b, c}, counter: 4, fenced: 3,
			want: []string{"counter: -1 increments lost"},
		},
		{
			name: "context ended for another reason", recs: []record{a, {Kind: "section", Worker: 1, Token: 2, Fenced: true, Enter: at(12), Exit: at(20), Cause: "context canceled"}, c},
			counter: 2, fenced: 2,
			want: []string{`unexpected cancellations: section of worker 1 client 0 (token 2): context ended by "context canceled"`},
		},
		{
			// Its stale write set the counter back from 2 to 1; the fenced
			// store refused it.
			name: "frozen holder", recs: []record{paused(refused(sec(0, 1, 0, 49, 50))), b, c}, counter: 1, fenced: 2,
		},
		{
			name: "frozen holder that wrote in time", recs: []record{paused(refused(sec(0, 1, 0, 8, 50))), b, c}, counter: 3, fenced: 2,
			want: []string{"frozen holder: 2 sections entered while its context was live, 0 stale writes taken by the counter, 0 increments lost"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyse(tc.recs)
			rep.countStores(tc.counter, tc.fenced)
			got := rep.problems()
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, w) }) {
					t.Errorf("not reported: %q...", w)
				}
			}
			for _, p := range got {
				if !slices.ContainsFunc(tc.want, func(w string) bool { return strings.HasPrefix(p, w) }) {
					t.Errorf("reported: %q", p)
				}
			}
			if t.Failed() {
				t.Logf("report: %v", rep)
			}
		})
	}
}

// TestExposed counts the sections a fault reached on hand-made windows:
// sections under way, at least in part, while it was in effect on their
// worker, each once. A fault that fired only in the gaps between sections
// reaches none, and fails the least number TestFaults asks of it.
func TestExposed(t *testing.T) {
	t.Parallel()
	recs := []record{
		sec(0, 1, 0, 8, 10),   // before the windows
		sec(1, 2, 12, 18, 20), // across the start of the first
		sec(2, 3, 22, 28, 30), // inside both
		sec(0, 4, 32, 38, 40), // across the end of the second, on worker 0
		sec(1, 5, 42, 48, 50), // entered as the second ended
		{Kind: "error", Worker: 1, Enter: at(25)},
	}
	for _, tc := range []struct {
		name    string
		windows []window
		want    int
	}{
		{"every worker", []window{{-1, at(15), at(35)}, {-1, at(21), at(29)}}, 3},
		{"one worker", []window{{0, at(15), at(42)}}, 1},
		{"in a gap", []window{{-1, at(10), at(12)}, {-1, at(20), at(22)}}, 0},
	} {
		r := &faultRun{windows: tc.windows}
		if got := r.exposed(recs); got != tc.want {
			t.Errorf("%s: %d sections exposed, want %d", tc.name, got, tc.want)
		}
	}
}

// TestOvertakes checks the order check of TestMutualExclusion on a
// hand-made history: a section whose Lock began after another's and that
// entered first overtook it, by the difference of their beginnings.
func TestOvertakes(t *testing.T) {
	t.Parallel()
	a, b, c := sec(0, 1, 0, 8, 10), sec(1, 2, 12, 18, 20), sec(2, 3, 22, 28, 30)
	a.Begin, b.Begin, c.Begin = at(-5), at(-3), at(-40) // c waited longest, and was served last
	for _, tc := range []struct {
		margin int64
		n      int
		worst  int64
	}{
		{0, 2, at(-3) - at(-40)},
		{int64(35e6), 1, at(-3) - at(-40)},
		{int64(37e6), 0, 0},
	} {
		n, first, worst := overtakes([]record{c, b, a}, tc.margin)
		if n != tc.n || worst != tc.worst || len(first) != n {
			t.Errorf("margin %s: %d overtakes %q, worst %s; want %d, worst %s", ms(tc.margin), n, first, ms(worst), tc.n, ms(tc.worst))
		}
	}
}
