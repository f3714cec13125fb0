package idempotency_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// bankCall is the body of a replica's call to the bank.
type bankCall struct {
	Order   string `json:"order"`
	Replica string `json:"replica"`
	Amount  int    `json:"amount,omitempty"`
}

// payment is one payment the bank made.
type payment struct {
	ID      string
	Replica string
	Amount  int
}

// bank is the HTTP server, in the test's process, that the replicas'
// handlers pay through. It records every run a handler announced
// (POST /begin) and every payment (POST /payments, answered with a new
// payment id), and can hold a replica's handler in /begin, before it
// pays, until the test releases it or the replica goes away, or fail it
// there.
type bank struct {
	URL string

	mu    sync.Mutex
	next  int
	runs  map[string][]string    // order -> the replicas whose handler began, in order
	paid  map[string][]payment   // order -> its payments
	gates map[gateKey]chan gated // runs to hold in /begin
	fail  map[string]bool        // orders whose next run /begin refuses (503)
}

type gateKey struct{ order, replica string }

// gated is sent on a gate's channel when a run reaches it; the run goes on
// when release is closed (or its replica goes away).
type gated struct {
	release chan struct{}
}

// newBank starts a bank on a loopback port, closed when the test ends.
func newBank(t testing.TB) *bank {
	t.Helper()
	b := &bank{runs: map[string][]string{}, paid: map[string][]payment{}, gates: map[gateKey]chan gated{}, fail: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /begin", b.begin)
	mux.HandleFunc("POST /payments", b.pay)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// failNext makes the next run of order fail in /begin, before it pays:
// the handler answers 502.
func (b *bank) failNext(order string) {
	b.mu.Lock()
	b.fail[order] = true
	b.mu.Unlock()
}

// hold makes the next run of order by replica wait in /begin: the
// returned channel delivers it when it arrives.
func (b *bank) hold(order, replica string) <-chan gated {
	ch := make(chan gated, 1)
	b.mu.Lock()
	b.gates[gateKey{order, replica}] = ch
	b.mu.Unlock()
	return ch
}

func (b *bank) begin(w http.ResponseWriter, r *http.Request) {
	var c bankCall
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.runs[c.Order] = append(b.runs[c.Order], c.Replica)
	gate, held := b.gates[gateKey{c.Order, c.Replica}]
	delete(b.gates, gateKey{c.Order, c.Replica})
	fail := b.fail[c.Order]
	delete(b.fail, c.Order)
	b.mu.Unlock()
	if fail {
		http.Error(w, "bank unavailable", http.StatusServiceUnavailable)
		return
	}
	if held {
		g := gated{release: make(chan struct{})}
		gate <- g
		select {
		case <-g.release:
		case <-r.Context().Done(): // the replica went away
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b *bank) pay(w http.ResponseWriter, r *http.Request) {
	var c bankCall
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.next++
	p := payment{ID: "pay-" + strconv.Itoa(b.next), Replica: c.Replica, Amount: c.Amount}
	b.paid[c.Order] = append(b.paid[c.Order], p)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"payment": p.ID})
}

// ledger returns a copy of what the bank recorded for order: the
// replicas whose handler began, and the payments.
func (b *bank) ledger(order string) (runs []string, paid []payment) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.runs[order]...), append([]payment(nil), b.paid[order]...)
}

// payments returns the number of payments made in all.
func (b *bank) payments() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next
}
