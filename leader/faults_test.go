package leader_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// faultLease is the lease of the fault test's election.
const faultLease = 2 * time.Second

// failoverBound is how soon after its leader froze or died another
// replica must lead: within the lease + 1 s.
var failoverBound = faultLease + max(time.Second, locktest.Bound(250*time.Millisecond))

// resignBound is how soon after its leader's graceful stop another
// replica must lead: a few hundred ms, well under the lease.
var resignBound = min(locktest.Bound(500*time.Millisecond), faultLease/2)

// fleet is the fault test's replicas and the Client it watches them with.
type fleet struct {
	t    *testing.T
	c    *lock.Client
	cmds []*exec.Cmd
	dir  string
}

// A led is a term whose lead ran: its replica, token and start.
type led struct {
	id    int
	token uint64
	start time.Time
}

// led returns the terms whose lead ran (was seen live) and whether each
// has ended, by token.
func (f *fleet) led() (map[uint64]led, map[uint64]bool) {
	terms, ended := map[uint64]led{}, map[uint64]bool{}
	starts := map[uint64]time.Time{}
	for _, e := range f.events(func(e event) bool { return e.kind != "write" }) {
		switch e.kind {
		case "start":
			starts[e.token] = e.at
		case "live":
			terms[e.token] = led{e.id, e.token, starts[e.token]}
		case "end":
			ended[e.token] = true
		}
	}
	return terms, ended
}

// next waits, up to limit, for the first term with a token above old to
// lead, and returns it.
func (f *fleet) next(old uint64, limit time.Duration) led {
	f.t.Helper()
	var got led
	if !f.wait(limit, func(terms map[uint64]led, _ map[uint64]bool) bool {
		for tok, tm := range terms {
			if tok > old && (got.token == 0 || tok < got.token) {
				got = tm
			}
		}
		return got.token != 0
	}) {
		f.dump()
		f.t.Fatalf("no term after token %d led within %v", old, limit)
	}
	return got
}

// current waits, up to limit, for a term that leads and has not ended,
// and returns it.
func (f *fleet) current(limit time.Duration) led {
	f.t.Helper()
	var got led
	if !f.wait(limit, func(terms map[uint64]led, ended map[uint64]bool) bool {
		for tok, tm := range terms {
			if !ended[tok] && tok > got.token {
				got = tm
			}
		}
		return got.token != 0
	}) {
		f.dump()
		f.t.Fatalf("no term leads within %v", limit)
	}
	return got
}

// wait polls the replicas' events every 5 ms, up to limit, until cond
// holds.
func (f *fleet) wait(limit time.Duration, cond func(map[uint64]led, map[uint64]bool) bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond(f.led()) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// process returns replica id's process.
func (f *fleet) process(tm led) *os.Process { return f.cmds[tm.id].Process }

// TestFaultsNeverTwoLeaders runs 4 replicas in processes of their own
// with a 2 s lease, each leading with fenced writes every 10 ms, through
// five faults: the leader SIGSTOPped past its lease then continued, the
// leader SIGKILLed, Redis SIGSTOPped 1.5 s, then 2.5 s (past the lease),
// and the leader stopped gracefully (SIGTERM). Then it checks, from the replicas' events (on
// this machine's one clock): no two terms' lead contexts were seen live
// at overlapping times; tokens rise with each term; the frozen leader's
// context was over when it ran again and its late write was refused by
// the fence; each failover within the lease + 1 s, the graceful one
// within a few hundred ms; Observe, reading every 20 ms from the test's
// process, reported each term Redis answered during (all but the one
// the stalls take up) with its replica's label and pid.
func TestFaultsNeverTwoLeaders(t *testing.T) {
	locktest.Timed(t)
	r, _ := newRedis(t)
	f := &fleet{t: t, c: locktest.NewClient(t, r.Client(t)), dir: t.TempDir()}
	for i := range 4 {
		file := filepath.Join(f.dir, fmt.Sprintf("c%d.log", i))
		f.cmds = append(f.cmds, locktest.StartChild(t, childVar(r.Addr, i, faultLease, file), "ready"))
	}
	octx, stopObserving := context.WithCancel(context.Background())
	defer stopObserving()
	observed := observeAll(octx, f.c, "fault")
	first := f.next(0, locktest.Bound(5*time.Second))
	if info, err := leader.Current(context.Background(), f.c, "fault"); err != nil || info.Token != first.token ||
		info.Leader.Label != fmt.Sprintf("c%d", first.id) || info.Leader.PID != f.process(first).Pid {
		t.Fatalf("Current: %+v, %v; want c%d (pid %d) with token %d", info, err, first.id, f.process(first).Pid, first.token)
	}

	f.sawTerm(observed, first)
	// 1. The leader frozen past its lease: another leads within it + 1 s.
	stopped := time.Now()
	_ = f.process(first).Signal(syscall.SIGSTOP)
	second := f.next(first.token, failoverBound+time.Second)
	t.Logf("leader c%d SIGSTOPped: c%d leads %v later", first.id, second.id, second.start.Sub(stopped))
	if took := second.start.Sub(stopped); took > failoverBound {
		t.Errorf("new leader %v after the leader froze, want within %v", took, failoverBound)
	}
	f.sawTerm(observed, second)
	time.Sleep(time.Until(stopped.Add(faultLease + time.Second)))
	_ = f.process(first).Signal(syscall.SIGCONT)
	locktest.Eventually(t, locktest.Bound(2*time.Second), "the frozen replica's late write", func() bool {
		return len(f.events(func(e event) bool { return e.kind == "late" })) > 0
	})

	// 2. The leader killed: another leads within the lease + 1 s.
	killed := time.Now()
	_ = f.process(second).Kill()
	third := f.next(second.token, failoverBound+time.Second)
	t.Logf("leader c%d SIGKILLed: c%d leads %v later", second.id, third.id, third.start.Sub(killed))
	if took := third.start.Sub(killed); took > failoverBound {
		t.Errorf("new leader %v after the leader was killed, want within %v", took, failoverBound)
	}

	f.sawTerm(observed, third)
	// 3. Redis stalled for 1.5 s: the leader may keep its term, or lose
	// it (then another leads).
	r.Pause()
	time.Sleep(1500 * time.Millisecond)
	r.Resume()
	fourth := f.current(failoverBound)
	t.Logf("Redis stalled 1.5 s: c%d leads (token %d; before: c%d, token %d)", fourth.id, fourth.token, third.id, third.token)

	// 4. Redis stalled past the lease: the leader's context ends with
	// lock.ErrLost before the lock can expire, and a new term leads after.
	stall := faultLease + 500*time.Millisecond
	r.Pause()
	time.Sleep(stall)
	resumed := time.Now()
	r.Resume()
	fifth := f.next(fourth.token, failoverBound)
	t.Logf("Redis stalled %v: c%d leads %v after it resumed", stall, fifth.id, fifth.start.Sub(resumed))
	var ends []event
	locktest.Eventually(t, locktest.Bound(time.Second), "the end of the term through the stall", func() bool {
		ends = f.events(func(e event) bool { return e.kind == "end" && e.token == fourth.token })
		return len(ends) > 0
	})
	if ends[0].details != "lock:_lease_lost" {
		t.Errorf("c%d's term through a stall past its lease ended %+v, want with cause lock.ErrLost", fourth.id, ends)
	}

	f.sawTerm(observed, fifth)
	// 5. The leader stopped gracefully: the next leads at once.
	term := time.Now()
	_ = f.process(fifth).Signal(syscall.SIGTERM)
	sixth := f.next(fifth.token, failoverBound)
	t.Logf("leader c%d SIGTERMed: c%d leads %v later", fifth.id, sixth.id, sixth.start.Sub(term))
	if took := sixth.start.Sub(term); took > resignBound {
		t.Errorf("new leader %v after the leader stopped gracefully, want within %v (lease %v)", took, resignBound, faultLease)
	}
	f.sawTerm(observed, sixth)
	stopObserving()
	observed.wait()
	killedID := second.id
	for i, cmd := range f.cmds {
		if i != killedID {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for i, cmd := range f.cmds {
		if err := cmd.Wait(); i != killedID && err != nil {
			t.Errorf("replica c%d: %v", i, err)
		}
	}
	f.check(first.id)
}

// dump logs the replicas' events but live and write, and their logs.
func (f *fleet) dump() {
	for _, e := range f.events(func(e event) bool { return e.kind != "live" && e.kind != "write" }) {
		f.t.Logf("%s c%d %d %s %s", e.kind, e.id, e.token, e.at.Format(time.StampMicro), e.details)
	}
	for i := range f.cmds {
		b, _ := os.ReadFile(filepath.Join(f.dir, fmt.Sprintf("c%d.log.log", i)))
		f.t.Logf("c%d's log:\n%s", i, b)
	}
}

// An event is a line of a replica's events (see events).
type event struct {
	kind    string
	id      int
	token   uint64
	at      time.Time
	details string
}

// events returns the replicas' events that keep says to.
func (f *fleet) events(keep func(event) bool) []event {
	f.t.Helper()
	var evs []event
	for i := range f.cmds {
		file, err := os.Open(filepath.Join(f.dir, fmt.Sprintf("c%d.log", i)))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			f.t.Fatal(err)
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			fs := strings.SplitN(sc.Text(), " ", 5)
			if len(fs) < 4 {
				continue // the last line of a killed replica
			}
			var e event
			e.kind = fs[0]
			e.id, _ = strconv.Atoi(fs[1])
			e.token, _ = strconv.ParseUint(fs[2], 10, 64)
			us, _ := strconv.ParseInt(fs[3], 10, 64)
			e.at = time.UnixMicro(us)
			if len(fs) == 5 {
				e.details = fs[4]
			}
			if keep(e) {
				evs = append(evs, e)
			}
		}
		_ = file.Close()
	}
	return evs
}

// check checks the replicas' events after the faults (see
// TestFaultsNeverTwoLeaders); frozen is the replica that was SIGSTOPped.
func (f *fleet) check(frozen int) {
	t := f.t
	terms, problems := termProblems(f.events(func(e event) bool { return e.kind != "campaign" }))
	for _, p := range problems {
		t.Error(p)
	}
	resumes := f.events(func(e event) bool { return e.kind == "resume" })
	lates := f.events(func(e event) bool { return e.kind == "late" })
	if len(resumes) == 0 || resumes[0].id != frozen {
		t.Errorf("resumed replicas: %+v, want c%d first", resumes, frozen)
	}
	for _, e := range resumes { // the frozen one, and any other replica held up past its lease
		if !strings.HasPrefix(e.details, "leader=false held=false cause="+lock.ErrLost.Error()) {
			t.Errorf("c%d ran again after a gap past its lease with %q, want its lead context over (leader=false held=false cause=%v)", e.id, e.details, lock.ErrLost)
		}
	}
	for _, e := range lates {
		if e.details != "refused" {
			t.Errorf("c%d's late write with token %d: %s, want refused by the fence", e.id, e.token, e.details)
		}
	}
	refused := f.events(func(e event) bool { return e.kind == "write" && e.details == "refused" })
	failed := f.events(func(e event) bool { return e.kind == "write" && e.details == "error" })
	writes := f.events(func(e event) bool { return e.kind == "write" })
	if len(terms) < 5 { // the leader may keep its term through the short Redis stall
		t.Errorf("%d terms, want at least 5 (one per fault but the short stall)", len(terms))
	}
	if t.Failed() {
		f.dump()
	}
	t.Logf("%d terms, %d fenced writes: %d refused %+v, %d unanswered (Redis stalled)", len(terms), len(writes), len(refused), refused, len(failed))
}
