package cronlock_test

import (
	"testing"
	"time"

	"github.com/lockkit/lockkit/cronlock"
)

// A replica alone with Redis stopped (SIGSTOP) for 5 s, three times: the
// commands of attempts Redis did not answer run when it resumes, and one
// of them may take the tick marker late. That marker is this replica's
// own attempt's, not another replica's run: the ticks after Redis resumes
// are never reported skipped-tick-done (no other replica exists), and the
// job runs again.
func TestStallNeverReportsOwnLateMarkerAsDone(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	r := newReplica(t, rdb, nil)
	r.add(t, uniqueName(), nop)
	r.s.Start()
	r.rec.waitFor(t, cronlock.OutcomeRan, 3*time.Second)
	for range 3 {
		srv.Pause()
		time.Sleep(5 * time.Second)
		// Resume 100 ms past a whole second: that tick's attempt, still
		// waiting for Redis, runs after the late commands of the ticks
		// before, one of which takes the marker.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
		srv.Resume()
		resumed := len(r.rec.all())
		r.rec.waitRanSince(t, resumed, 5*time.Second, "a run after Redis resumed")
	}
	waitStopped(t, r.s)
	done := 0
	for _, a := range r.rec.all() {
		if a.Outcome != cronlock.OutcomeRan {
			t.Logf("tick %s: %s %v", a.Tick.Format("15:04:05.000"), a.Outcome, a.Err)
		}
		if a.Outcome == cronlock.OutcomeSkippedTickDone {
			done++
		}
	}
	if done != 0 {
		t.Errorf("%d ticks reported skipped-tick-done with no other replica: they ran nowhere", done)
	}
}
