package reliability_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

// faultRun is one run of the workload with a fault injected while it
// runs.
type faultRun struct {
	srv      *redistest.Server // the locks' Redis, or the one the fault hits
	store    *redistest.Server // the stores' Redis, which no fault touches
	replica  *redistest.Server // the locks' Redis's replica, with Sentinel
	sentinel *redistest.Server
	proxies  []*toxiproxy.Proxy // proxies[i] carries worker i's connections, if the workers dial through proxies
	fleet    *fleet
	lease    time.Duration
	long     time.Duration // how long worker 0's long section holds
	windows  []window      // when the fault was in effect
	// restarted, if set, is called with the locks' Redis after each
	// restart, to set again what its command line does not.
	restarted func(*testing.T, *redistest.Server)
	drift     time.Duration // the Clients' drift allowance, if not the default
	lapsed    int64         // when the cut-off holder's lease was seen gone in Redis
}

// proxied starts the locks' Redis, its scripts cached, and a proxy to it
// for each worker.
func proxied(t *testing.T, r *faultRun) []lockRedis {
	r.srv = redistest.Start(t)
	warmScripts(t, r.srv.Addr) // TestSlowRepliesKeepLease covers a cold script cache
	var dial []lockRedis
	for i := range workers {
		p := newProxy(t, fmt.Sprint("worker", i), r.srv.Addr)
		r.proxies = append(r.proxies, p)
		dial = append(dial, lockRedis{Nodes: []string{p.Listen}})
	}
	return dial
}

// direct returns a start function of a fault: the locks' Redis started
// with args, which every worker dials directly.
func direct(args ...string) func(*testing.T, *faultRun) []lockRedis {
	return func(t *testing.T, r *faultRun) []lockRedis {
		r.srv = redistest.Start(t, args...)
		return slices.Repeat([]lockRedis{{Nodes: []string{r.srv.Addr}}}, workers)
	}
}

// stores reads the values of the unfenced counter and the fenced store.
func (r *faultRun) stores(t *testing.T) (counter, fenced int) {
	t.Helper()
	counter, fenced, err := readStores(context.Background(), r.store.Client(t))
	if err != nil {
		t.Fatalf("read the stores: %v", err)
	}
	return counter, fenced
}

// awaitHeld waits until the key of TestFaults is held in srv by a new
// holder (fencing token), other than the one of token past ("" for any):
// seen at two looks 1 ms apart after a look that saw another or none, so
// that its section is under way, just begun, not just handed to a waiter
// about to start it, nor about to end: then a fault injected at once
// exposes it. (Taking any holder seen twice, a kill in a cluster landed
// after the section's exit in 2 of 10 restarts. A holder whose release no
// replica confirmed stays in Redis until its lease ends, its section long
// over: past leaves it out.) It reports false if the workers finished
// first, and fails t if the key is not held within 10 s. A Redis that
// does not answer, or refuses (a cluster master rejoining), holds no key.
func (r *faultRun) awaitHeld(t *testing.T, srv *redistest.Server, past string) bool {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	deadline := now() + int64(10*time.Second)
	for looks, last, before := 0, "", ""; ; looks++ {
		h := holder(rdb)
		if looks >= 2 && h != "" && h != past && h == last && before != last {
			return true
		}
		before, last = last, h
		if now() > deadline {
			t.Fatal("key not held by a new holder within 10 s")
		}
		if !r.sleep(time.Millisecond) {
			return false
		}
	}
}

// holder returns the fencing token of the holder of the key of
// TestFaults in rdb, or "" when it is free or Redis does not answer.
func holder(rdb *redis.Client) string { return holderOf(rdb, faultHash) }

// holderOf returns the fencing token of the holder of the lock whose
// hash is hash in rdb, or "" when it is free or Redis does not answer.
// For a semaphore it is the first holder's whose lease has not ended.
// It reads the hash as docs/design.md describes it (the token t while the
// hold count n is not 0, or, in a semaphore's, the token of a field
// "=<owner>": "<kind> <count> <token> <lease end ms>") with read commands
// only, HGETALL and TIME, which Redis runs during CLIENT PAUSE WRITE (a
// script it would hold back).
func holderOf(rdb *redis.Client, hash string) string {
	ctx := context.Background()
	h, err := rdb.HGetAll(ctx, hash).Result()
	if err != nil {
		return ""
	}
	if n, t := h["n"], h["t"]; n != "" && n != "0" && t != "" {
		return t
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return ""
	}
	for field, v := range h {
		var kind string
		var count, token, until int64
		if strings.HasPrefix(field, "=") && len(strings.Fields(v)) == 4 {
			if _, err := fmt.Sscanf(v, "%s %d %d %d", &kind, &count, &token, &until); err == nil && until >= now.UnixMilli() {
				return strconv.FormatInt(token, 10)
			}
		}
	}
	return ""
}

// awaitLapse waits up to d for the lease of the key's present holder in
// the locks' Redis, read directly, to lapse, looking every millisecond,
// and returns when it saw it gone, no earlier than it lapsed; 0 if it did
// not within d, or the key was not held.
func (r *faultRun) awaitLapse(d time.Duration) int64 {
	rdb := redis.NewClient(&redis.Options{Addr: r.srv.Addr})
	defer rdb.Close()
	h := holder(rdb)
	for end := now() + int64(d); h != "" && now() < end; time.Sleep(time.Millisecond) {
		if holder(rdb) != h {
			return now()
		}
	}
	return 0
}

// exposed counts the sections that were under way, at least in part,
// while the fault was in effect on their worker.
func (r *faultRun) exposed(recs []record) int {
	n := 0
	for _, rec := range recs {
		for _, w := range r.windows {
			if rec.Kind == "section" && (w.worker < 0 || rec.Worker == w.worker) && rec.Enter < w.end && rec.Exit > w.start {
				n++
				break
			}
		}
	}
	return n
}

// A window is a time a fault was in effect on one worker's proxy, or on
// all of them (worker -1).
type window struct {
	worker     int
	start, end int64
}

// sleep waits d, or until the workers finished: then it reports false.
func (r *faultRun) sleep(d time.Duration) bool {
	select {
	case <-r.fleet.done:
		return false
	case <-time.After(d):
		return true
	}
}

// spikes applies the toxic x(i) to the proxy of worker w(i), or to all
// for w(i) < 0, for on, then none for off, for i = 0, 1, ... until the
// workers finish.
func (r *faultRun) spikes(t *testing.T, w func(i int) int, x func(i int) toxic, on, off time.Duration) {
	t.Helper()
	for i := 0; ; i++ {
		tx, wi := x(i), w(i)
		r.apply(t, wi, tx)
		start := now()
		more := r.sleep(on)
		r.remove(t, wi, tx.Name)
		r.windows = append(r.windows, window{wi, start, now()})
		if !more || !r.sleep(off) {
			return
		}
	}
}

// everyWorker is the w of spikes that applies the toxic to every worker.
func everyWorker(int) int { return -1 }

// apply adds x to the proxy of worker w, or to all for w < 0.
func (r *faultRun) apply(t *testing.T, w int, x toxic) {
	t.Helper()
	for i, p := range r.proxies {
		if w < 0 || i == w {
			if err := addToxic(p, x); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// remove removes the toxic name from the proxy of worker w, or from all
// for w < 0.
func (r *faultRun) remove(t *testing.T, w int, name string) {
	t.Helper()
	for i, p := range r.proxies {
		if w < 0 || i == w {
			if err := removeToxic(p, name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// awaitLong waits until worker 0 is inside its long section.
func (r *faultRun) awaitLong(t *testing.T) record {
	t.Helper()
	select {
	case rec := <-r.fleet.long:
		return rec
	case <-r.fleet.done:
		t.Fatal("the workers finished without a long section")
	case <-time.After(30 * time.Second):
		t.Fatal("no long section within 30 s")
	}
	return record{}
}

// recovery is the longest time, after the end of a fault window, until a
// worker it hit completed a section again.
func (r *faultRun) recovery(recs []record) int64 {
	var worst int64
	for _, w := range r.windows {
		first := int64(-1)
		for _, rec := range recs {
			if rec.Done && (w.worker < 0 || rec.Worker == w.worker) && rec.Enter > w.end && (first < 0 || rec.Enter < first) {
				first = rec.Enter
			}
		}
		if first > 0 {
			worst = max(worst, first-w.end)
		}
	}
	return worst
}

// longSection returns worker 0's long section and the section entered
// next.
func longSection(t *testing.T, recs []record) (long, next record) {
	t.Helper()
	for _, rec := range recs {
		if rec.Kind == "section" && rec.Worker == 0 && rec.Client == 0 && (long.Enter == 0 || rec.Enter < long.Enter) {
			long = rec
		}
	}
	for _, rec := range recs {
		if rec.Kind == "section" && rec.Enter > long.Enter && (next.Enter == 0 || rec.Enter < next.Enter) {
			next = rec
		}
	}
	if long.Enter == 0 || next.Enter == 0 {
		t.Fatal("no long section, or none after it")
	}
	return long, next
}
