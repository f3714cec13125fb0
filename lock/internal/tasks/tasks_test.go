package tasks

import (
	"testing"
	"time"
)

// Close waits for the functions running, and Run refuses work after it.
func TestCloseWaitsAndRefusesWork(t *testing.T) {
	r := New()
	release := make(chan struct{})
	ended := make(chan struct{})
	if !r.Run(func() { <-release; close(ended) }) {
		t.Fatal("Run refused work before Close")
	}
	if r.Close(10 * time.Millisecond) {
		t.Fatal("Close reported every goroutine ended while one still ran")
	}
	close(release)
	if !r.Close(time.Second) {
		t.Fatal("Close did not see the goroutine end")
	}
	select {
	case <-ended:
	default:
		t.Fatal("Close returned before the function ended")
	}
	if r.Run(func() {}) {
		t.Error("Run accepted work after Close")
	}
}
