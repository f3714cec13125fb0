package protocol

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Watchers over random queues: at most three, of distinct Clients other
// than the receiver's, from behind it; the first waiters of the first two
// other Clients among the Span behind it and the last waiter of another
// Client among the last Span; none that will try within two claim windows
// by itself, and those are not replaced by others.
func TestWatchersRule(t *testing.T) {
	seed := rand.Uint64()
	const now, claim = start, CaseClaim
	for i := range 5000 {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		n := 1 + r.IntN(40)
		clients := 1 + r.IntN(8)
		queue := make([]string, 0, n)
		waits := map[string]int64{}
		for j := range n {
			w := fmt.Sprintf("c%d:%d", r.IntN(clients), j)
			queue = append(queue, w)
			waits[w] = now + 2*claim + 1 + r.Int64N(5000)
			if r.IntN(4) == 0 {
				waits[w] = now + r.Int64N(2*claim+1) // tries by itself soon
			}
		}
		o := queue[0]
		got := Watchers(queue, waits, o, now, claim)
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d, case %d, queue %v: watchers %v: %s", seed, i, queue, got, fmt.Sprintf(format, args...))
		}
		if len(got) > 3 {
			fail("more than three")
		}
		// What the rule picks before the near deadlines are left out.
		told := map[string]bool{ClientOf(o): true}
		var want []string
		window := queue[1:min(len(queue), Span+1)]
		for _, w := range window {
			if c := ClientOf(w); !told[c] && len(want) < 2 {
				told[c] = true
				want = append(want, w)
			}
		}
		tail := window
		if len(queue) > Span+1 {
			tail = queue[len(queue)-Span:]
		}
		for j := len(tail) - 1; j >= 0; j-- {
			if c := ClientOf(tail[j]); !told[c] {
				want = append(want, tail[j])
				break
			}
		}
		want = slices.DeleteFunc(want, func(w string) bool { return waits[w] <= now+2*claim })
		if !slices.Equal(got, want) {
			fail("want %v", want)
		}
		seen := map[string]bool{}
		for _, w := range got {
			c := ClientOf(w)
			if seen[c] || c == ClientOf(o) || slices.Index(queue, w) < 1 {
				fail("%s: a second of its Client, the receiver's, or not behind it", w)
			}
			seen[c] = true
		}
	}
}

// A hand-off tells at most four Clients whatever the queue: the receiver
// and three watchers.
func TestHandOffTellsAtMostFour(t *testing.T) {
	w := NewWorld(start, CaseClaim, CaseLease)
	w.Apply(TryOp("h:1"))
	for i := range 100 {
		w.Apply(WaitOp(fmt.Sprintf("c%d:1", i)))
	}
	s := w.Apply(ReleaseOp("h:1", 0))
	if got := briefs(s.Msgs); len(got) != 4 {
		t.Fatalf("hand-off told %q, want the receiver and three watchers", got)
	}
}
