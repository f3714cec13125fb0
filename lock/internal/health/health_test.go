package health

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// replyError is an error reply of Redis's.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

// failLimit failures in a row skip the node; once the back-off passed one
// call probes it; a success makes it healthy; Redis's own error replies
// are answers, not failures; a nil Tracker is never skipped.
func TestSkipsRepeatedlyFailingNode(t *testing.T) {
	var nilTracker *Tracker
	nilTracker.Observe(context.DeadlineExceeded)
	if !nilTracker.Available() {
		t.Fatal("a nil Tracker was skipped")
	}
	var nh Tracker
	for i := 0; i < 10; i++ {
		nh.Observe(replyError("ERR from Redis"))
	}
	if !nh.Available() {
		t.Fatal("Redis error replies made the node skipped")
	}
	for i := 0; i < failLimit-1; i++ {
		nh.Observe(context.DeadlineExceeded)
	}
	if !nh.Available() {
		t.Fatalf("skipped after %d failures, want after %d", failLimit-1, failLimit)
	}
	nh.Observe(context.DeadlineExceeded)
	if nh.Available() {
		t.Fatalf("called after %d failures in a row", failLimit)
	}
	nh.mu.Lock()
	nh.skipUntil = time.Now().Add(-time.Millisecond) // the back-off passed
	nh.mu.Unlock()
	if !nh.Available() {
		t.Fatal("no probe after the back-off")
	}
	if nh.Available() {
		t.Fatal("a second call while the probe is under way")
	}
	nh.Observe(nil)
	if !nh.Available() {
		t.Fatal("skipped after a success")
	}
}
