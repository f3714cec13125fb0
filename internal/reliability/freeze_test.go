package reliability_test

import (
	"io"
	"syscall"
	"testing"
	"time"
)

// injectRedisFrozen freezes the locks' Redis with SIGSTOP while worker 0
// is inside its long section, for one and a half leases, then for 300 ms
// (within a lease) every 700 ms until the workers finish.
func injectRedisFrozen(t *testing.T, r *faultRun) {
	r.awaitLong(t)
	more := r.freezeRedis(r.lease * 3 / 2)
	for more && r.sleep(400*time.Millisecond) {
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

// injectWaitersFrozen freezes worker 1 with SIGSTOP for 3 s while worker
// 0 is inside its long section: each of worker 1's Clients is waiting in
// the key's queue then. The other workers' sections go on meanwhile,
// passing over the frozen waiters when their turns come.
func injectWaitersFrozen(t *testing.T, r *faultRun) {
	r.awaitLong(t)
	r.freezeWorker(t, 1, 3*time.Second)
}

// injectHolderFrozen freezes worker 0 with SIGSTOP for three leases
// where its long section waits: the holder has read the stores and
// checked that its lock context is live, and is about to write. Worker
// 0's other Clients, waiting in the queue, are frozen with it. After
// SIGCONT the holder makes its writes: what the lock context alone
// cannot keep out and a fenced store refuses (see report.requireSafe).
func injectHolderFrozen(t *testing.T, r *faultRun) {
	r.awaitLong(t)
	r.freezeWorker(t, 0, 3*r.lease)
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
