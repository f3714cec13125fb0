package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestChurnOfImmediateLeadsNeitherOverlapsNorSpins: three replicas whose
// lead returns at once (nil, or an error) with the default back-off take
// turns: one lead at a time, by live contexts and by timestamps, tokens
// increasing, and each replica campaigns at most once per back-off (100
// ms after a term that ended well, doubling after errors): no hot loop.
func TestChurnOfImmediateLeadsNeitherOverlapsNorSpins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		most int // campaigns per replica in d
	}{
		{"nil", nil, 2 * 16}, // 100 ms pauses: 16 in 1.6 s, twice for slack
		{"error", errors.New("done"), 2 * 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, _ := newRedis(t)
			cs := replicas(t, r, 3)
			cls := make([]*countingLocker, len(cs))
			lockers := make([]lock.Locker, len(cs))
			for i, c := range cs {
				cls[i] = &countingLocker{Locker: c}
				lockers[i] = cls[i]
			}
			const d = 1600 * time.Millisecond
			tr := newTracker()
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			done := runAll(t, ctx, lockers, "spin", func(i int) func(context.Context) error {
				return tr.lead(t, i, "spin", func(context.Context) error { return tc.err })
			}, leader.WithLogger(slog.New(slog.DiscardHandler)))
			locktest.Within(t, done, d+locktest.Bound(time.Second), "every Run returned")
			terms, most := tr.snapshot()
			checkTerms(t, terms, most)
			sort.Slice(terms, func(i, j int) bool { return terms[i].start.Before(terms[j].start) })
			for i := 1; i < len(terms); i++ {
				if a, b := terms[i-1], terms[i]; b.start.Before(a.end) {
					t.Errorf("replica %d's lead started %v before replica %d's returned", b.who, a.end.Sub(b.start), a.who)
				}
			}
			if len(terms) < locktest.Least(3) {
				t.Errorf("%d terms in %v, want at least %d", len(terms), d, locktest.Least(3))
			}
			for i, cl := range cls {
				cl.mu.Lock()
				n := len(cl.starts)
				cl.mu.Unlock()
				if n > tc.most {
					t.Errorf("replica %d campaigned %d times in %v, want at most %d", i, n, d, tc.most)
				}
				t.Logf("replica %d: %d campaigns in %v", i, n, d)
			}
			t.Logf("%d terms", len(terms))
		})
	}
}
