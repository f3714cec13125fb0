package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// election is the name of the demo's singleton work: one replica at a
// time writes the daily report.
const election = "reporter"

// terms records every replica's terms as leader of the election, by this
// process's clock: the replicas run in one process, so their terms can be
// compared directly.
type terms struct {
	mu      sync.Mutex
	list    []term
	started chan struct{} // gets a value when a term starts
}

// term is one replica's time as leader.
type term struct {
	replica    int
	token      uint64
	start, end time.Time // end is zero while the term is on
}

func newTerms() *terms { return &terms{started: make(chan struct{}, 16)} }

// lead is the replica's work as leader: it holds the term until ctx ends
// (leadership lost, or the replica stops).
func (ts *terms) lead(replica int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		tok, _ := lock.FencingToken(ctx, leader.Key(election))
		ts.mu.Lock()
		i := len(ts.list)
		ts.list = append(ts.list, term{replica: replica, token: tok, start: time.Now()})
		ts.mu.Unlock()
		select {
		case ts.started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		ts.mu.Lock()
		ts.list[i].end = time.Now()
		ts.mu.Unlock()
		return nil
	}
}

// current returns the term on now, if any.
func (ts *terms) current() (term, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.list {
		if t.end.IsZero() {
			return t, true
		}
	}
	return term{}, false
}

// overlaps counts pairs of terms that were on at once.
func (ts *terms) overlaps() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for i, a := range ts.list {
		for _, b := range ts.list[i+1:] {
			if on(a, b.start) || on(b, a.start) {
				n++
			}
		}
	}
	return n
}

// on reports whether t was on at time at.
func on(t term, at time.Time) bool {
	return !at.Before(t.start) && (t.end.IsZero() || at.Before(t.end))
}

// handOver is what happened when the leader's replica stopped.
type handOver struct {
	from, to   term
	gap        time.Duration // from the old term's end to the new one's start
	redisSaid  string        // who leads, as Redis has it afterwards
	overlapped int           // pairs of terms on at once, over the whole run
	err        error
}

// ok reports whether another replica took over within a second of the
// leader's stop and no two terms were ever on at once.
func (h handOver) ok() bool {
	return h.err == nil && h.to.replica != h.from.replica && h.gap < time.Second && h.overlapped == 0
}

// handOverLeader stops the election of the replica that leads now, as a
// rolling deploy stops its pod, and waits for another to lead.
func (f *fleet) handOverLeader(ctx context.Context) handOver {
	from, ok := f.terms.current()
	if !ok {
		return handOver{err: fmt.Errorf("no replica led")}
	}
	for len(f.terms.started) > 0 { // only terms that start from now on count
		<-f.terms.started
	}
	f.replicas[from.replica].stopLeading()
	h := handOver{from: from}
	select {
	case <-f.terms.started:
	case <-time.After(5 * time.Second):
		h.err = fmt.Errorf("no replica led within 5 s of replica %d's stop", from.replica+1)
		return h
	}
	h.to, _ = f.terms.current()
	f.terms.mu.Lock()
	for _, t := range f.terms.list {
		if t.replica == from.replica && t.token == from.token {
			h.gap = h.to.start.Sub(t.end)
		}
	}
	f.terms.mu.Unlock()
	h.overlapped = f.terms.overlaps()
	if info, err := leader.Current(ctx, f.replicas[h.to.replica].locker, election); err == nil && info.Led {
		h.redisSaid = info.Leader.Label
	}
	return h
}

// print writes the report's leader lines, each with check's verdict.
func (h handOver) print(w io.Writer, check func(bool) string) {
	if h.err != nil {
		fmt.Fprintf(w, "leader       %v  %s\n", h.err, check(false))
		return
	}
	fmt.Fprintf(w, "leader       replica-%d led (token %d); when it stopped, replica-%d led %v later (Redis: %s)  %s\n",
		h.from.replica+1, h.from.token, h.to.replica+1, h.gap.Round(10*time.Microsecond), h.redisSaid,
		check(h.to.replica != h.from.replica && h.gap < time.Second))
	fmt.Fprintf(w, "             terms on at once: %d  %s\n", h.overlapped, check(h.overlapped == 0))
}
