package idempotency_test

import (
	"net/http"
	"strconv"
	"testing"
)

// failedOrders are the orders of TestIdempotencyFailedRunRunsAgain.
const failedOrders = 10

// TestIdempotencyFailedRunRunsAgain fails the first run of 10 orders at
// the bank, before it pays: the handler answers 502, which the
// middleware passes on and never stores (no 5xx is). The client's retry
// at the next replica (again after a 409, if the failed run's lock is
// not yet released) runs the handler again and pays; every retry after
// that, to any replica, replays that answer.
func TestIdempotencyFailedRunRunsAgain(t *testing.T) {
	t.Parallel()
	f := startFleet(t, fleetConfig{lease: onceLease})
	run := randomHex(4)
	for o := 1; o <= failedOrders; o++ {
		order := strconv.Itoa(o)
		f.bank.failNext(order)
		r := request{order: o, replica: o % replicas, key: "failed-" + order + "-" + run, amount: 100 + o}
		if a := f.pay(r, phaseFirst); a.status != http.StatusBadGateway || a.replayed() {
			t.Errorf("%v: want the handler's 502, not replayed", a)
			continue
		}
		r.replica = (r.replica + 1) % replicas
		j := &journal{}
		f.settle(r, j.add(f.pay(r, phaseSettle)), phaseSettle, j) // a 409 while the failed run's lock goes
		answers := j.all()
		fresh := answers[len(answers)-1]
		if !fresh.fresh() {
			t.Errorf("%v: want a second run of the handler", fresh)
			continue
		}
		for rep := range replicas {
			r.replica = rep
			if a := f.pay(r, phaseCompleted); !a.replayed() || string(a.body) != string(fresh.body) {
				t.Errorf("%v: want a replay of %s", a, fresh.body)
			}
		}
		if runs, paid := f.bank.ledger(order); len(runs) != 2 || len(paid) != 1 {
			t.Errorf("order %d: bank runs %v, payments %+v; want 2 runs, 1 payment", o, runs, paid)
		}
	}
	n := f.outcomes()
	if n["not-stored"] != failedOrders || n["ran"] != failedOrders {
		t.Errorf("replicas' outcomes %v: want not-stored %d, ran %d", n, failedOrders, failedOrders)
	}
	t.Logf("replicas' outcomes: %v", n)
}
