package lock

import (
	"testing"
	"time"
)

// A waiter that is not woken tries again just after the lease it was told
// of ends: a millisecond later when it was told 0 (under a millisecond
// left), not a second later as for a key without a TTL.
func TestRetryFollowsTheLeaseEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		remaining time.Duration
		want      time.Duration
	}{
		{"lease ends within a millisecond", 0, time.Millisecond},
		{"lease ends in 250 ms", 250 * time.Millisecond, 251 * time.Millisecond},
		{"key without a TTL", -1 * time.Millisecond, time.Second},
		{"no key", -2 * time.Millisecond, time.Second},
	} {
		if got := retryAfter(tc.remaining); got != tc.want {
			t.Errorf("%s: retryAfter(%v) = %v, want %v", tc.name, tc.remaining, got, tc.want)
		}
	}
}
