package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/httplock"
)

// Retries of a payment: a client answered 409 (another request is paying
// the order, or the payment's first request still runs) or 503 (the lock
// service did not answer in time, as on a busy host) asks again after the
// answer's Retry-After, with jitter, as a real client does, within a
// bounded budget. A client waits firstWait payTimes for its first answer
// and asks again when it does not come; every request of a payment
// carries the payment's Idempotency-Key, so that a retry gets the first
// request's answer instead of paying again. The report counts every
// answer.
const (
	maxAttempts   = 5               // requests per payment, the first included
	maxRetryAfter = 2 * time.Second // the longest Retry-After obeyed
	// firstWait times payTime is how long a client waits for its first
	// answer: between an ordinary payment and a slow one.
	firstWait = slowFactor / 2
)

// payment is how one client's payment of an order ended.
type payment struct {
	status   int // of the last answer; 0: none
	attempts int
	replayed bool // the last answer was the first request's, replayed
}

// answer is one request's outcome: its status (0: no answer in time) and
// whether it was a replay.
type answer struct {
	status   int
	replayed bool
}

// drive sends payments from cfg.concurrency clients to random replicas for
// cfg.duration, or until ctx is done, printing a progress line every
// second. Each second brings cfg.orders new order ids; a client pays one of
// the newest ids, so each order gets many duplicate payments, some at the
// same moment on different replicas. Payments under way at the end are
// finished, retries included, not cut off. It returns the orders paid for,
// the count of answers per HTTP status (0: no answer) and the payments.
func drive(ctx context.Context, cfg config, urls []string, progress io.Writer) (orders map[string]bool, answers map[answer]int, payments []payment) {
	start := time.Now()
	running := func() bool { return ctx.Err() == nil && time.Since(start) < cfg.duration }
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var sent atomic.Int64
	var mu sync.Mutex
	orders, answers = map[string]bool{}, map[answer]int{}
	answered := func(a answer) {
		sent.Add(1)
		mu.Lock()
		answers[a]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range cfg.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for running() {
				second := int(time.Since(start) / time.Second)
				order := fmt.Sprintf("%d-%d", second, rand.IntN(cfg.orders))
				mu.Lock()
				orders[order] = true
				mu.Unlock()
				p := pay(ctx, client, urls, order, cfg.payTime*firstWait, answered)
				mu.Lock()
				payments = append(payments, p)
				mu.Unlock()
			}
		}()
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for running() {
		select {
		case <-ctx.Done():
		case <-t.C:
			fmt.Fprintf(progress, "  %4.1fs  %6d requests sent\n", time.Since(start).Seconds(), sent.Load())
		}
	}
	wg.Wait()
	return orders, answers, payments
}

// pay pays order at random replicas until one answers 200, retrying a 409
// or 503 after its Retry-After and a random jitter of up to as much again,
// and a first request not answered within first after a short pause, at
// most maxAttempts times in all, all with one Idempotency-Key. It calls
// answered with each answer.
func pay(ctx context.Context, client *http.Client, urls []string, order string, first time.Duration, answered func(answer)) payment {
	var p payment
	key := newIdempotencyKey()
	for {
		limit := time.Duration(0)
		if p.attempts == 0 {
			limit = first
		}
		a, retryAfter := post(ctx, client, urls[rand.IntN(len(urls))]+"/orders/"+order+"/pay", key, limit)
		p.status, p.replayed = a.status, a.replayed
		p.attempts++
		answered(a)
		retry := a.status == 0 || a.status == http.StatusConflict || a.status == http.StatusServiceUnavailable
		if !retry || p.attempts == maxAttempts || ctx.Err() != nil {
			return p
		}
		// Jitter, as careful clients add: the requests turned away together
		// do not all come back at the same instant to collide again.
		wait := retryAfter + rand.N(retryAfter+1)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return p
		}
	}
}

// newIdempotencyKey is a fresh key for one payment: 128 random bits, sent
// as a structured-field string, as the IETF draft writes it.
func newIdempotencyKey() string {
	return fmt.Sprintf("%q", fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()))
}

// post sends one payment with the Idempotency-Key key, waiting at most
// limit (0: as long as the client's timeout) for the answer. It returns
// the answer, with status 0 if none came, and the wait before a retry:
// what its Retry-After asks for (at most maxRetryAfter; 1 s when it has
// none), or a tenth of a second after no answer.
func post(ctx context.Context, client *http.Client, url, key string, limit time.Duration) (answer, time.Duration) {
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return answer{}, 0
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, 100 * time.Millisecond
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	retryAfter := time.Second
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
		retryAfter = min(time.Duration(secs)*time.Second, maxRetryAfter)
	}
	return answer{status: resp.StatusCode, replayed: resp.Header.Get(httplock.ReplayedHeader) == "true"}, retryAfter
}
