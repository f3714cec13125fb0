package reliability_test

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/lockkit/lockkit/lock"
)

// report is what the records of a run show.
type report struct {
	sections int            // increments made while the lock context was live
	failed   int            // lock obtained, but the increment failed or the lease was lost
	lockErrs int            // Lock calls that returned an error
	errs     map[string]int // Lock, GET, SET and unlock errors by message
	lost     int            // leases lost: context cancelled with ErrLost, or unlock returned ErrLost
	// Violations, each described in a sentence.
	overlaps []string // a section entered while another holder's context was live inside its section
	late     []string // a loss seen only after another holder had entered
	causes   []string // a context cancelled inside a section for a reason other than ErrLost
	tokens   []string // a fencing token not above the previous one
	maxGap   int64    // longest time between one section's end and the next entry
	span     int64    // first entry to last exit

	// Writes to the stores. A write is stale when it was sent after
	// another section had entered: the writer's lease had run out. The
	// time is taken before the write, so a write counted stale surely was;
	// one sent just after the next entry may go uncounted.
	sets, fenceSets  int      // writes the unfenced counter and the fenced store took
	staleSets        []string // stale writes the unfenced counter took
	staleFenceSets   []string // stale writes the fenced store took
	fenceRefused     int      // writes the fenced store refused
	lostIncrements   int      // sets minus the counter's value (see countStores)
	lostFenced       int      // fenceSets minus the fenced store's value
	paused           int      // sections the test froze inside (see workerConfig.Pause)
	pausedOverlapped int      // sections entered while a frozen holder's context was live
	// Writes the fenced store refused of sections the test did not freeze:
	// each is a stale write, or a token below one the store took before.
	liveRefused []string
}

// liveEnd is the end of the time r's holder was inside its section with a
// live lock context: its exit, or the moment it saw the loss if earlier.
// Both are taken after the fact, so the interval can only be longer than
// the truth, never hide an overlap.
func liveEnd(r record) int64 {
	if r.Lost > 0 {
		return min(r.Exit, r.Lost)
	}
	return r.Exit
}

// analyse checks the records of a run. Fencing tokens must increase in
// entry order across the whole run, also across restarts of an empty Redis
// (see docs/design.md).
func analyse(recs []record) report {
	rep := report{errs: make(map[string]int)}
	var secs []record
	for _, r := range recs {
		for _, e := range []string{r.Err, r.Unlock} {
			if e != "" {
				rep.errs[e]++
			}
		}
		switch r.Kind {
		case "error":
			rep.lockErrs++
		case "section":
			secs = append(secs, r)
		}
	}
	slices.SortFunc(secs, func(a, b record) int { return cmp.Compare(a.Enter, b.Enter) })
	var prev record
	var maxEnd int64
	lastToken := uint64(0)
	for i, r := range secs {
		if r.Done {
			rep.sections++
		} else {
			rep.failed++
		}
		rep.countWrites(secs, i)
		if r.Fenced {
			if r.Token <= lastToken {
				rep.tokens = append(rep.tokens, fmt.Sprintf("%s got token %d after %d", who(r), r.Token, lastToken))
			}
			lastToken = r.Token
		}
		if r.Lost > 0 || r.Unlock == lock.ErrLost.Error() {
			rep.lost++
		}
		if r.Paused {
			// A holder frozen inside its section cannot know that its lease
			// ran out: the sections entered meanwhile are counted, not
			// judged, and it is left out of the checks of the others.
			rep.paused++
			for _, s := range secs[i+1:] {
				if s.Enter < liveEnd(r) {
					rep.pausedOverlapped++
				}
			}
			continue
		}
		if !r.Live && r.Lost == 0 {
			rep.causes = append(rep.causes, fmt.Sprintf("%s: context ended by %q", who(r), r.Cause))
		}
		// A loss seen inside the section must come before anyone else
		// enters. One that only its unlock reports, after the section ended
		// (a retried release that met the next owner), cannot overlap: the
		// overlap check below covers the section itself.
		if r.Lost > 0 && r.Lost <= r.Exit && i+1 < len(secs) && secs[i+1].Enter <= r.Lost {
			rep.late = append(rep.late, fmt.Sprintf("%s saw its loss %s after %s entered",
				who(r), ms(r.Lost-secs[i+1].Enter), who(secs[i+1])))
		}
		if maxEnd > 0 {
			if r.Enter <= maxEnd {
				rep.overlaps = append(rep.overlaps, fmt.Sprintf("%s entered %s before %s left",
					who(r), ms(maxEnd-r.Enter), who(prev)))
			} else {
				rep.maxGap = max(rep.maxGap, r.Enter-maxEnd)
			}
		}
		if e := liveEnd(r); e > maxEnd {
			maxEnd, prev = e, r
		}
	}
	if len(secs) > 0 {
		last := slices.MaxFunc(secs, func(a, b record) int { return cmp.Compare(a.Exit, b.Exit) })
		rep.span = last.Exit - secs[0].Enter
	}
	return rep
}

// countWrites counts the writes of secs[i], of sections sorted by entry.
func (rep *report) countWrites(secs []record, i int) {
	r := secs[i]
	if r.Set {
		rep.sets++
	}
	if r.FenceSet {
		rep.fenceSets++
	} else if r.Fenced && r.Set {
		rep.fenceRefused++
		if !r.Paused {
			rep.liveRefused = append(rep.liveRefused, fmt.Sprintf("%s wrote with token %d", who(r), r.Token))
		}
	}
	if r.Write == 0 || i+1 == len(secs) || secs[i+1].Enter >= r.Write {
		return
	}
	stale := fmt.Sprintf("%s wrote %s after %s entered", who(r), ms(r.Write-secs[i+1].Enter), who(secs[i+1]))
	if r.Set {
		rep.staleSets = append(rep.staleSets, stale)
	}
	if r.FenceSet {
		rep.staleFenceSets = append(rep.staleFenceSets, stale)
	}
}

// countStores sets the increments lost, from the values of the unfenced
// counter and of the fenced store. The stores' Redis is reached directly
// and no fault touches it, so every write a store took is known: anything
// but 0 means increments that read the same value, or a stale write that
// set the value back.
func (rep *report) countStores(counter, fenced int) {
	rep.lostIncrements = rep.sets - counter
	rep.lostFenced = rep.fenceSets - fenced
}

// requireSafe fails t with each of the report's problems.
func (rep report) requireSafe(t *testing.T) {
	t.Helper()
	for _, p := range rep.problems() {
		t.Error(p)
	}
}

// problems describes any overlap, late loss, unexpected cancellation,
// out-of-order token, stale write taken, write of a live holder the fenced
// store refused or lost increment, at most 5 of each kind. When the test
// froze a holder inside its section, it requires instead what the docs
// say of pauses, of the unfenced counter: sections entered while the
// frozen holder's context was live, and its stale write taken, costing
// increments; the fenced store must still take no stale write.
func (rep report) problems() []string {
	var ps []string
	unfenced := rep.staleSets
	if rep.paused > 0 {
		unfenced = nil
		if rep.pausedOverlapped == 0 || len(rep.staleSets) == 0 || rep.lostIncrements <= 0 {
			ps = append(ps, fmt.Sprintf("frozen holder: %d sections entered while its context was live, %d stale writes taken by the counter, %d increments lost: want at least one of each",
				rep.pausedOverlapped, len(rep.staleSets), rep.lostIncrements))
		}
	} else if rep.lostIncrements != 0 {
		ps = append(ps, fmt.Sprintf("counter: %d increments lost", rep.lostIncrements))
	}
	if rep.lostFenced != 0 {
		ps = append(ps, fmt.Sprintf("fenced store: %d increments lost", rep.lostFenced))
	}
	for _, group := range []struct {
		what string
		list []string
	}{
		{"overlapping sections", rep.overlaps},
		{"losses seen too late", rep.late},
		{"unexpected cancellations", rep.causes},
		{"fencing tokens out of order", rep.tokens},
		{"stale writes taken by the counter", unfenced},
		{"stale writes taken by the fenced store", rep.staleFenceSets},
		{"writes of holders not frozen refused by the fenced store", rep.liveRefused},
	} {
		for i, s := range group.list {
			if i == 5 {
				ps = append(ps, fmt.Sprintf("%s: %d more", group.what, len(group.list)-i))
				break
			}
			ps = append(ps, fmt.Sprintf("%s: %s", group.what, s))
		}
	}
	return ps
}

func (rep report) String() string {
	s := fmt.Sprintf("%d sections done, %d failed, %d Lock errors, %d overlaps, %d leases lost (%d seen late), longest gap %s, %s in all; "+
		"counter: %d stale writes taken, %d increments lost; fenced store: %d stale writes taken, %d refused, %d increments lost",
		rep.sections, rep.failed, rep.lockErrs, len(rep.overlaps), rep.lost, len(rep.late), ms(rep.maxGap), ms(rep.span),
		len(rep.staleSets), rep.lostIncrements, len(rep.staleFenceSets), rep.fenceRefused, rep.lostFenced)
	if rep.paused > 0 {
		s += fmt.Sprintf("; %d sections entered while the frozen holder's context was live", rep.pausedOverlapped)
	}
	return s
}

// logErrors logs the errors the workers saw, the most frequent first.
func (rep report) logErrors(t *testing.T) {
	t.Helper()
	msgs := slices.Collect(maps.Keys(rep.errs))
	slices.SortFunc(msgs, func(a, b string) int { return cmp.Compare(rep.errs[b], rep.errs[a]) })
	for i, m := range msgs {
		if i == 8 {
			t.Logf("... and %d other errors", len(msgs)-i)
			break
		}
		t.Logf("%5d × %s", rep.errs[m], m)
	}
}

func who(r record) string {
	return fmt.Sprintf("section of worker %d client %d (token %d)", r.Worker, r.Client, r.Token)
}
