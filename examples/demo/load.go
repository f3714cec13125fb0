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
)

// Retries of a payment: a client answered 409 (another request is paying
// the order) or 503 (the lock service did not answer in time, as on a
// busy host) asks again after the answer's Retry-After, with jitter, as a
// real client does, within a bounded budget; the report counts every
// answer.
const (
	maxAttempts   = 5               // requests per payment, the first included
	maxRetryAfter = 2 * time.Second // the longest Retry-After obeyed
)

// payment is how one client's payment of an order ended.
type payment struct {
	status   int // of the last answer; 0: none
	attempts int
}

// drive sends payments from cfg.concurrency clients to random replicas for
// cfg.duration, or until ctx is done, printing a progress line every
// second. Each second brings cfg.orders new order ids; a client pays one of
// the newest ids, so each order gets many duplicate payments, some at the
// same moment on different replicas. Payments under way at the end are
// finished, retries included, not cut off. It returns the orders paid for,
// the count of answers per HTTP status (0: no answer) and the payments.
func drive(ctx context.Context, cfg config, urls []string, progress io.Writer) (orders map[string]bool, statuses map[int]int, payments []payment) {
	start := time.Now()
	running := func() bool { return ctx.Err() == nil && time.Since(start) < cfg.duration }
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var sent atomic.Int64
	var mu sync.Mutex
	orders, statuses = map[string]bool{}, map[int]int{}
	answered := func(status int) {
		sent.Add(1)
		mu.Lock()
		statuses[status]++
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
				p := pay(ctx, client, urls, order, answered)
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
	return orders, statuses, payments
}

// pay pays order at random replicas until one answers 200, retrying a 409
// or 503 after its Retry-After and a random jitter of up to as much again,
// at most maxAttempts times in all. It calls
// answered with the status of each answer.
func pay(ctx context.Context, client *http.Client, urls []string, order string, answered func(status int)) payment {
	var p payment
	for {
		status, retryAfter := post(ctx, client, urls[rand.IntN(len(urls))]+"/orders/"+order+"/pay")
		p.status = status
		p.attempts++
		answered(status)
		if status != http.StatusConflict && status != http.StatusServiceUnavailable || p.attempts == maxAttempts {
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

// post sends one payment and returns the answer's status, 0 if none came,
// and the wait its Retry-After asks for (at most maxRetryAfter; 1 s when
// it has none).
func post(ctx context.Context, client *http.Client, url string) (int, time.Duration) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return 0, 0
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	retryAfter := time.Second
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
		retryAfter = min(time.Duration(secs)*time.Second, maxRetryAfter)
	}
	return resp.StatusCode, retryAfter
}
