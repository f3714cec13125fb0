package idempotency_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Timing of TestIdempotencyCrashedRunFreesKeyWithinLease's replicas.
const (
	crashLease  = time.Second
	crashOrders = 3 // runs in the crashed replica's handler at once
	victim      = 0 // the replica that crashes
)

// answerPrefix begins the Redis key of every stored answer (the
// middleware's default prefix).
const answerPrefix = httplock.DefaultKeyPrefix + "answer:"

// runPrefix begins the name of every run lock's key (inside the lock
// Client's braces).
const runPrefix = httplock.DefaultKeyPrefix + "run:"

// TestIdempotencyCrashedRunFreesKeyWithinLease crashes a replica while
// its handler runs 3 orders, each held at the bank before it pays. While
// it runs, a duplicate to another replica gets 409; once it crashed,
// each order retried every 20 ms at the other replicas gets 409 for at
// most one lease (1 s) after the crash, then a run of its handler there,
// paid; nothing was stored before that run, and every later retry, to
// any replica, replays that run's answer. Rows are the crashes: killed
// (SIGKILL); frozen (SIGSTOP) past its lease, then resumed and let pay,
// when its answer, a stale run's, must not be stored.
func TestIdempotencyCrashedRunFreesKeyWithinLease(t *testing.T) {
	locktest.Timed(t)
	for _, tc := range []struct {
		name   string
		freeze bool // SIGSTOP, and SIGCONT once the order ran elsewhere; else SIGKILL
	}{
		{name: "killed"},
		{name: "frozen past its lease, then resumed", freeze: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, fleetConfig{lease: crashLease, storeTimeout: 2 * time.Second})
			reqs, gates, stale := startHeldRuns(t, f)
			for _, r := range reqs {
				r.replica = (victim + 1) % replicas
				if a := f.pay(r, phaseSettle); a.status != http.StatusConflict {
					t.Fatalf("%v while %s's handler runs, want 409", a, replicaName(victim))
				}
			}
			crash := syscall.SIGKILL
			if tc.freeze {
				crash = syscall.SIGSTOP
			}
			if err := f.procs[victim].Process.Signal(crash); err != nil {
				t.Fatal(err)
			}
			crashed := time.Now()
			if !tc.freeze {
				_ = f.procs[victim].Wait()
			}
			if stored := answerKeys(f); len(stored) != 0 {
				t.Fatalf("answers stored before any handler finished: %q", stored)
			}
			runs := retryUntilRun(f, reqs, crashed)
			if tc.freeze {
				for _, g := range gates {
					close(g.release)
				}
				if err := f.procs[victim].Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			}
			answers := stale()
			var figures []string
			for i, r := range reqs {
				a, c := runs[i].run, runs[i].lastConflict
				switch {
				case a.status == 0:
					t.Errorf("order %d: still 409 %v after the crash (lease %v)", r.order, crashLease+locktest.Bound(time.Second), crashLease)
					continue
				case !a.fresh():
					t.Errorf("%v: want a run of the handler on a live replica", a)
					continue
				}
				if c.status != 0 && c.sent.Sub(crashed) >= crashLease {
					t.Errorf("order %d: 409 to a request sent %v after the crash, over the lease %v", r.order, c.sent.Sub(crashed), crashLease)
				}
				figures = append(figures, fmt.Sprintf("order %d: last 409 sent %v after the crash, run sent %v after",
					r.order, c.sent.Sub(crashed).Round(time.Millisecond), a.sent.Sub(crashed).Round(time.Millisecond)))
				checkRerun(t, f, r, a, tc.freeze)
				if tc.freeze {
					t.Logf("the resumed replica's own answer: %v", answers[i])
				} else if answers[i].err == nil {
					t.Errorf("%v: want the killed replica's connection broken", answers[i])
				}
			}
			if stored := answerKeys(f); len(stored) != crashOrders {
				t.Errorf("%d answers stored, want %d: %q", len(stored), crashOrders, stored)
			}
			if tc.freeze {
				if n := f.outcomesOf(victim); n["ran"] != 0 {
					t.Errorf("the resumed replica stored %d answers of its stale runs (outcomes %v)", n["ran"], n)
				} else {
					t.Logf("the resumed replica's outcomes: %v", n)
				}
			}
			t.Logf("key free again after the crash (lease %v): %s", crashLease, strings.Join(figures, "; "))
		})
	}
}

// startHeldRuns sends crashOrders orders to the victim replica, each
// held at the bank in /begin, and returns once every handler is there:
// the requests, the held runs, and a function that waits for the
// victim's answers and returns them.
func startHeldRuns(t *testing.T, f *fleet) ([]request, []gated, func() []answer) {
	t.Helper()
	run := randomHex(4)
	reqs := make([]request, crashOrders)
	answers := make([]answer, crashOrders)
	var arrivals []<-chan gated
	var wg sync.WaitGroup
	for i := range reqs {
		o := i + 1
		reqs[i] = request{order: o, replica: victim, key: fmt.Sprintf("crash-%d-%s", o, run), quoted: true, amount: 100 + o}
		arrivals = append(arrivals, f.bank.hold(strconv.Itoa(o), replicaName(victim)))
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = f.pay(reqs[i], phaseFirst) }()
	}
	var gates []gated
	for i, ch := range arrivals {
		select {
		case g := <-ch:
			gates = append(gates, g)
		case <-time.After(locktest.Bound(5 * time.Second)):
			t.Fatalf("order %d's handler did not reach the bank on %s", reqs[i].order, replicaName(victim))
		}
	}
	return reqs, gates, func() []answer {
		locktest.Within(t, locktest.Waited(&wg), clientPatience, "the crashed replica's answers")
		return answers
	}
}

// rerun is what an order's retries after a crash got: the first answer
// that was not 409, and the last 409.
type rerun struct{ run, lastConflict answer }

// retryUntilRun retries each request every retryPause at the replicas
// other than the victim until an answer is not 409, for one lease after
// crashed and locktest.Bound(1 s) more at most.
func retryUntilRun(f *fleet, reqs []request, crashed time.Time) []rerun {
	out := make([]rerun, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := reqs[i]
			deadline := crashed.Add(crashLease + locktest.Bound(time.Second))
			for n := 1; time.Now().Before(deadline); n++ {
				r.replica = victim + 1 + n%(replicas-1)
				a := f.pay(r, phaseSettle)
				if a.status != http.StatusConflict {
					out[i].run = a
					return
				}
				out[i].lastConflict = a
				time.Sleep(retryPause)
			}
		}()
	}
	wg.Wait()
	return out
}

// checkRerun checks an order whose first run crashed with its replica
// and whose retry ran on a live replica with answer fresh: the bank saw
// both runs and one payment by the live replica (and, when the crashed
// replica was resumed and let pay, at most one by it: its handler pays
// whatever its lock says); the answer names the live replica's payment,
// and a retry to every replica alive replays it.
func checkRerun(t *testing.T, f *fleet, r request, fresh answer, resumed bool) {
	t.Helper()
	runs, paid := f.bank.ledger(strconv.Itoa(r.order))
	live := replicaName(fresh.replica)
	var byLive []payment
	for _, p := range paid {
		if p.Replica == live {
			byLive = append(byLive, p)
		}
	}
	stalePaid := len(paid) - len(byLive)
	if len(runs) != 2 || runs[0] != replicaName(victim) || runs[1] != live || len(byLive) != 1 || stalePaid > 0 && !resumed || stalePaid > 1 {
		t.Errorf("order %d: bank runs %v, payments %+v; want runs [%s %s] and one payment by %s",
			r.order, runs, paid, replicaName(victim), live, live)
		return
	}
	if stalePaid > 0 {
		t.Logf("order %d: the resumed replica's stale run paid too (naive handler): %+v", r.order, paid)
	}
	var rc receipt
	if err := json.Unmarshal(fresh.body, &rc); err != nil || rc.Payment != byLive[0].ID || rc.Replica != live {
		t.Errorf("%v: receipt %+v (%v), bank paid %+v", fresh, rc, err, byLive[0])
	}
	for rep := range replicas {
		if rep == victim && !resumed {
			continue
		}
		r.replica = rep
		a := f.pay(r, phaseCompleted)
		if !a.replayed() || a.status != http.StatusCreated || string(a.body) != string(fresh.body) {
			t.Errorf("%v: want a replay of %s", a, fresh.body)
		}
	}
}

// answerKeys returns the Redis keys of stored answers.
func answerKeys(f *fleet) []string {
	var out []string
	for _, k := range f.redis.Keys() {
		if strings.HasPrefix(k, answerPrefix) {
			out = append(out, k)
		}
	}
	return out
}
