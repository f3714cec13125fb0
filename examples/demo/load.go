package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// drive sends payments from cfg.concurrency clients to random replicas for
// cfg.duration, or until ctx is done, printing a progress line every
// second. Each second brings cfg.orders new order ids; a client pays one of
// the newest ids, so each order gets many duplicate payments, some at the
// same moment on different replicas. Requests under way at the end are
// answered, not cut off. It returns the orders paid for and the count of
// answers per HTTP status (0: no answer).
func drive(ctx context.Context, cfg config, urls []string, progress io.Writer) (orders map[string]bool, statuses map[int]int) {
	start := time.Now()
	running := func() bool { return ctx.Err() == nil && time.Since(start) < cfg.duration }
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var sent atomic.Int64
	var mu sync.Mutex
	orders, statuses = map[string]bool{}, map[int]int{}
	var wg sync.WaitGroup
	for range cfg.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for running() {
				second := int(time.Since(start) / time.Second)
				order := fmt.Sprintf("%d-%d", second, rand.IntN(cfg.orders))
				status := post(ctx, client, urls[rand.IntN(len(urls))]+"/orders/"+order+"/pay")
				sent.Add(1)
				mu.Lock()
				orders[order] = true
				statuses[status]++
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
	return orders, statuses
}

// post sends one payment and returns the answer's status, 0 if none came.
func post(ctx context.Context, client *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return 0
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}
