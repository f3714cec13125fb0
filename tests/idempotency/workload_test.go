package idempotency_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// The workload: orders paid by clients of the payment service.
const (
	orders      = 200 // orders paid per run
	orderWorker = 20  // orders in flight at once
	// Every orderKinds-th order is paid by clients that time out while
	// its handler runs; the next slowKinds orders have slow handlers;
	// the others are fast.
	orderKinds = 10
	slowKinds  = 2
	// pathOffset: an order's key sent to the path of order+pathOffset,
	// which no client pays.
	pathOffset = 1000
)

// Delays of the handlers (delayHeader) and the client timeout that cuts
// short a request to a timing-out order's handler: the timeout is far
// below the delay, so that the client's retry arrives while the handler
// still runs.
const (
	slowDelay     = 150 * time.Millisecond
	timeoutDelay  = 800 * time.Millisecond
	clientTimeout = 100 * time.Millisecond
)

// Phases of an order's requests (answer.phase).
const (
	phaseFirst      = "first"            // the 3 concurrent clients' first requests
	phaseAfterTO    = "after-timeout"    // a client's retry right after its request timed out
	phaseSettle     = "settle"           // a client's retries until it has its answer
	phaseCompleted  = "after-completion" // a retry to every replica once the order's answer is known
	phaseChangeBody = "changed-body"     // the key with another amount
	phaseChangePath = "changed-path"     // the key on another order's path
)

// retryPause is how long a client waits before retrying a 409, a 503 or
// a timeout: shorter than the Retry-After hint, so that retries meet the
// first request still running.
const retryPause = 20 * time.Millisecond

// journal is every answer of a run, in the order they came.
type journal struct {
	mu      sync.Mutex
	answers []answer
}

func (j *journal) add(a answer) answer {
	j.mu.Lock()
	j.answers = append(j.answers, a)
	j.mu.Unlock()
	return a
}

func (j *journal) all() []answer {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]answer(nil), j.answers...)
}

// payOrder is one order's script, run by 3 concurrent clients that send
// the same key and body to different replicas. Each client retries a
// timeout at once, then a 409, 503 or timeout after retryPause, until it
// has a 201. Then one more request goes to every replica, then the key
// with another amount, then the key on another order's path.
func (f *fleet) payOrder(o int, run string, j *journal) {
	base := request{order: o, key: fmt.Sprintf("pay-%d-%s", o, run), quoted: o%2 == 0, amount: 100 + o}
	switch k := o % orderKinds; {
	case k == 0:
		base.delay, base.timeout = timeoutDelay, clientTimeout
	case k <= slowKinds:
		base.delay = slowDelay
	}
	var wg sync.WaitGroup
	for c := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := base
			r.replica = (o + c) % replicas
			a := j.add(f.pay(r, phaseFirst))
			r.timeout = 0 // retries wait for their answer
			if timedOut(a) {
				r.replica = (r.replica + 1) % replicas
				a = j.add(f.pay(r, phaseAfterTO))
			}
			f.settle(r, a, phaseSettle, j)
		}()
	}
	wg.Wait()
	base.timeout = 0
	for c := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := base
			r.replica = c
			f.settle(r, j.add(f.pay(r, phaseCompleted)), phaseCompleted, j)
		}()
	}
	wg.Wait()
	changed := base
	changed.amount++
	f.settle(changed, j.add(f.pay(changed, phaseChangeBody)), phaseChangeBody, j)
	moved := base
	moved.path = fmt.Sprintf("/orders/%d/pay", o+pathOffset)
	f.settle(moved, j.add(f.pay(moved, phaseChangePath)), phaseChangePath, j)
}

// settle retries r (rotating over the replicas) while its last answer a
// is transient (409, 503, a timeout) and at most settleLimit.
func (f *fleet) settle(r request, a answer, phase string, j *journal) {
	deadline := time.Now().Add(settleLimit)
	for transient(a) && time.Now().Before(deadline) {
		time.Sleep(retryPause)
		r.replica = (r.replica + 1) % replicas
		a = j.add(f.pay(r, phase))
	}
}

// settleLimit bounds a client's retries of one request.
var settleLimit = locktest.Bound(10 * time.Second)

func transient(a answer) bool {
	return timedOut(a) || a.status == http.StatusConflict || a.status == http.StatusServiceUnavailable
}

// timedOut reports whether a's request was cut short by its client's
// timeout.
func timedOut(a answer) bool { return a.err != nil && errors.Is(a.err, context.DeadlineExceeded) }

// runWorkload pays every order, orderWorker at a time, and calls
// incident (if not nil) on a goroutine of its own once a third of the
// orders are paid. It returns every answer, once the incident and every
// order are done.
func (f *fleet) runWorkload(t *testing.T, incident func()) []answer {
	t.Helper()
	run := randomHex(4)
	j := &journal{}
	next := make(chan int)
	var wg, side sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range orderWorker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range next {
				f.payOrder(o, run, j)
				mu.Lock()
				done++
				if done == orders/3 && incident != nil {
					side.Add(1)
					go func() { defer side.Done(); incident() }()
				}
				mu.Unlock()
			}
		}()
	}
	for o := 1; o <= orders; o++ {
		next <- o
	}
	close(next)
	wg.Wait()
	side.Wait()
	return j.all()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
