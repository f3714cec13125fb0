package janitor

import (
	"context"
	"sync"
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
	clean := func(ctx context.Context, h int, mayHold bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if h != 7 || !mayHold {
			t.Errorf("clean(%d, mayHold %v), want 7, true", h, mayHold)
		}
		ok := len(tries) > 0 // the first try fails
		tries, oks = append(tries, time.Now()), append(oks, ok)
		return ok
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
