package janitor

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// An owner that may hold its key is cleaned up until Redis confirmed it
// twice, settle apart, with a failed try retried; Abandon returns at the
// first confirmation; Run ends once the Client is closed and nothing is
// left.
func TestCleansUntilConfirmedTwice(t *testing.T) {
	life, closeClient := context.WithCancel(context.Background())
	var mu sync.Mutex
	var tries []time.Time
	var oks []bool
	clean := func(ctx context.Context, h int, mayHold bool, parts Parts) (Parts, bool) {
		mu.Lock()
		defer mu.Unlock()
		if h != 7 || !mayHold || parts != All {
			t.Errorf("clean(%d, mayHold %v, parts %x), want 7, true, all", h, mayHold, parts)
		}
		ok := len(tries) > 0 // the first try fails
		tries, oks = append(tries, time.Now()), append(oks, ok)
		if !ok {
			return 0, false
		}
		return All, true
	}
	closeBy := time.Now().Add(time.Hour)
	j := New(life, clean, func() time.Time { return closeBy }, func() bool { return false })
	ran := make(chan struct{})
	go func() { j.Run(); close(ran) }()

	start := time.Now()
	j.Abandon(7, true, 5*time.Second)
	if d := time.Since(start); d < janitorRetry/2 || d > 2*time.Second {
		t.Errorf("Abandon returned after %v, want after the retry (%v) confirmed it", d, janitorRetry)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(tries)
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tries after 5 s, want 3", n)
		}
	}
	closeClient()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end after Close with nothing left")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(oks) != 3 || oks[0] || !oks[1] || !oks[2] {
		t.Fatalf("tries confirmed %v, want [false true true] and none after", oks)
	}
	if d := tries[2].Sub(tries[1]); d < settle {
		t.Errorf("second confirmation %v after the first, want at least %v", d, settle)
	}
}

// A cleanup owed on one part only (a node of a quorum that did not
// answer a release the others confirmed) is settled from the start: it is
// retried on that part alone while the part is silent, without holding up
// another owner's cleanup, then confirmed twice, settle apart, and
// dropped.
func TestSilentPartRetriedUntilConfirmedTwice(t *testing.T) {
	life, closeClient := context.WithCancel(context.Background())
	defer closeClient()
	const silent = Parts(1 << 2)
	var mu sync.Mutex
	answers := false // whether the silent part answers now
	var confirmedAt []time.Time
	tries := 0
	clean := func(ctx context.Context, h int, mayHold bool, parts Parts) (Parts, bool) {
		mu.Lock()
		defer mu.Unlock()
		if h == 2 {
			return All, true
		}
		if h != 1 || !mayHold || parts != silent {
			t.Errorf("clean(%d, mayHold %v, parts %x), want 1, true, %x", h, mayHold, parts, silent)
		}
		tries++
		if !answers {
			return 0, true
		}
		confirmedAt = append(confirmedAt, time.Now())
		return silent, true
	}
	j := New(life, clean, func() time.Time { return time.Now().Add(time.Hour) }, func() bool { return false })
	ran := make(chan struct{})
	go func() { j.Run(); close(ran) }()
	defer func() { closeClient(); <-ran }()

	j.Owe(1, silent, time.Now().Add(time.Hour))
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 5 s, not %s", what)
			}
		}
	}
	waitFor("retried while the part is silent", func() bool { return tries >= 3 })
	start := time.Now()
	j.Abandon(2, true, 5*time.Second)
	if d := time.Since(start); d >= janitorRetry {
		t.Errorf("another owner's cleanup settled %v after Abandon, want before the next retry (%v): held up by the silent part", d, janitorRetry)
	}
	mu.Lock()
	answers = true
	mu.Unlock()
	waitFor("confirmed twice", func() bool { return len(confirmedAt) == 2 })
	time.Sleep(3 * janitorRetry)
	mu.Lock()
	defer mu.Unlock()
	if len(confirmedAt) != 2 {
		t.Fatalf("the part confirmed %d times, want 2 and no cleanup after", len(confirmedAt))
	}
	if d := confirmedAt[1].Sub(confirmedAt[0]); d < settle {
		t.Errorf("second confirmation %v after the first, want at least %v", d, settle)
	}
}

// A release owed to a part that never answers (a node gone for good) is
// asked until the time Owe gave, then dropped; Close does not wait for it.
func TestOwedPartGivenUpAtItsTime(t *testing.T) {
	life, closeClient := context.WithCancel(context.Background())
	defer closeClient()
	var tries atomic.Int32
	clean := func(ctx context.Context, h int, mayHold bool, parts Parts) (Parts, bool) {
		tries.Add(1)
		return 0, true
	}
	closeBy := time.Now().Add(time.Hour)
	j := New(life, clean, func() time.Time { return closeBy }, func() bool { return false })
	ran := make(chan struct{})
	go func() { j.Run(); close(ran) }()
	j.Owe(1, 1<<2, time.Now().Add(3*janitorRetry))
	time.Sleep(6 * janitorRetry)
	n := tries.Load()
	if n < 2 {
		t.Fatalf("%d tries, want retries until the time given", n)
	}
	time.Sleep(3 * janitorRetry)
	if m := tries.Load(); m != n {
		t.Fatalf("%d tries after the time given, want none", m-n)
	}
	j.Owe(2, 1<<2, time.Now().Add(time.Hour))
	closeClient()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end after Close with only an owed release left")
	}
}
