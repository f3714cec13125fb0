package httpkit_test

import (
	"math"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/httpkit"
)

// A hint too long to round up without overflow still gives its whole
// seconds, not 1 (WithRetryAfter accepts any positive duration).
func TestRetryAfterOfHugeHint(t *testing.T) {
	for d, want := range map[time.Duration]int{
		math.MaxInt64:                       int(min(math.MaxInt64/int64(time.Second)+1, math.MaxInt32)),
		math.MaxInt64 - time.Second/2:       int(min(math.MaxInt64/int64(time.Second)+1, math.MaxInt32)),
		1000000 * time.Hour:                 int(min(int64(3600000000), math.MaxInt32)),
		1000000*time.Hour + time.Nanosecond: int(min(int64(3600000001), math.MaxInt32)),
	} {
		if got := httpkit.RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %d, want %d", d, got, want)
		}
	}
}
