package reliability_test

import (
	"cmp"
	"io"
	"slices"
	"syscall"
	"testing"
	"time"
)

// injectRedisFrozen freezes the locks' Redis with SIGSTOP while worker 0
// is inside its long section, for one and a half leases, then for 300 ms
// (within a lease) 200 ms after it was continued, as soon as a section is
// under way, until the workers finish.
func injectRedisFrozen(t *testing.T, r *faultRun) {
	r.awaitLong(t)
	more := r.freezeRedis(r.lease * 3 / 2)
	for more && r.sleep(200*time.Millisecond) && r.awaitHeld(t, r.srv, "") {
		more = r.freezeRedis(300 * time.Millisecond)
	}
}

// freezeRedis freezes the locks' Redis for d, or until the workers
// finished: then it reports false. A Redis left frozen by a failed test is
// continued when it is stopped.
func (r *faultRun) freezeRedis(d time.Duration) bool {
	r.srv.Pause()
	start := now()
	more := r.sleep(d)
	r.srv.Resume()
	r.windows = append(r.windows, window{-1, start, now()})
	return more
}

// injectWaitersFrozen freezes worker 1 with SIGSTOP for 4 s while worker
// 0 is inside its long section: each of worker 1's 3 Clients is waiting
// in the key's queue then. The other workers' sections go on meanwhile,
// passing over the frozen waiters when their turns come, at the cost of
// up to a claim window (1 s) each.
func injectWaitersFrozen(t *testing.T, r *faultRun) {
	r.awaitLong(t)
	r.freezeWorker(t, 1, 4*time.Second)
}

// injectHolderFrozen freezes worker 0 with SIGSTOP for four leases
// where its long section waits: the holder has read the stores and
// checked that its lock context is live, and is about to write. Worker
// 0's other Clients, waiting in the queue, are frozen with it: after the
// lease, each costs the others up to a claim window (1 s) when its turn
// comes, and the others still have a second. After
// SIGCONT the holder makes its writes: what the lock context alone
// cannot keep out and a fenced store refuses (see report.requireSafe).
func injectHolderFrozen(t *testing.T, r *faultRun) {
	r.awaitLong(t)
	r.freezeWorker(t, 0, 4*r.lease)
	if _, err := io.WriteString(r.fleet.children[0].stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// freezeWorker freezes worker w for d. The fault window is every
// worker's: the sections of the others are those it exposes. A worker
// left frozen by a failed test is continued when it is killed.
func (r *faultRun) freezeWorker(t *testing.T, w int, d time.Duration) {
	t.Helper()
	p := r.fleet.children[w].cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := now()
	time.Sleep(d)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r.windows = append(r.windows, window{-1, start, now()})
}

// checkHolderFrozen: the frozen holder's write went to both stores after
// another section had entered; the unfenced counter took it, the fenced
// store refused it.
func checkHolderFrozen(t *testing.T, r *faultRun, recs []record) {
	long, next := longSection(t, recs)
	if !long.Paused || !long.Set || long.FenceSet || long.Write <= next.Enter {
		t.Fatalf("frozen holder: paused %v, write %s after the next entry, taken by the counter %v, by the fenced store %v; want a stale write the counter took and the fenced store refused",
			long.Paused, ms(long.Write-next.Enter), long.Set, long.FenceSet)
	}
	t.Logf("holder frozen for %s; it wrote %s after the next holder entered, its lock context %s at that moment",
		ms(r.windows[0].end-r.windows[0].start), ms(long.Write-next.Enter), liveWord(long.Lost == 0 || long.Lost > long.Write))
}

// checkWaitersFrozen: the frozen waiters kept the key free, in gaps of
// more than 100 ms between one section's exit and the next entry, for at
// most one claim window (1 s) per frozen Client, plus 500 ms.
func checkWaitersFrozen(t *testing.T, r *faultRun, recs []record) {
	w := r.windows[0]
	var secs []record
	for _, rec := range recs {
		if rec.Kind == "section" {
			secs = append(secs, rec)
		}
	}
	slices.SortFunc(secs, func(a, b record) int { return cmp.Compare(a.Enter, b.Enter) })
	var stalled, longest, lastExit int64
	for _, rec := range secs {
		if gap := rec.Enter - lastExit; lastExit > 0 && gap > int64(100*time.Millisecond) && rec.Enter > w.start && lastExit < w.end {
			stalled += gap
			longest = max(longest, gap)
		}
		lastExit = max(lastExit, rec.Exit)
	}
	if limit := int64(clientsPerWorker)*int64(time.Second) + int64(500*time.Millisecond); stalled > limit {
		t.Errorf("the key stood free %s in all during the freeze, more than %s", ms(stalled), ms(limit))
	}
	t.Logf("during the %s freeze the key stood free %s in gaps over 100 ms, the longest %s", ms(w.end-w.start), ms(stalled), ms(longest))
}
