package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// Quorum nodes restarted empty forget the locks they had: restarted at
// once, a majority of them lets a second owner in while the first
// holder's context is live (the known hole of Redlock without
// persistence). Kept out for one lease before they come back, as the
// Redlock spec advises, they let no one in before the holder has learned
// of its loss.
func TestQuorumNodesRestartedEmpty(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	for _, tc := range []struct {
		name    string
		delayed bool
		lease   time.Duration // at once: long enough that no renewal comes before the restarts end
	}{
		{"at once", false, 5 * time.Second},
		{"after one lease", true, time.Second},
	} {
		lease := tc.lease
		t.Run(tc.name, func(t *testing.T) {
			srvs, clients := quorumOf(t, 5)
			holder := newQuorum(t, clients(), lock.WithDefaultLease(lease))
			other := newQuorum(t, clients(), lock.WithDefaultLease(lease))
			ctx := context.Background()
			held, unlock, err := holder.Lock(ctx, "restart")
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			for _, s := range srvs[:3] {
				if tc.delayed {
					s.Stop()
				} else {
					s.Restart()
				}
			}
			if tc.delayed {
				time.Sleep(lease + 100*time.Millisecond)
				for _, s := range srvs[:3] {
					s.Restart() // starts it again, empty
				}
			}
			start := time.Now()
			var taken bool
			for !taken && time.Since(start) < 3*lease {
				_, unlockOther, err := other.TryLock(ctx, "restart")
				if taken = err == nil; taken {
					defer unlockOther()
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
			if !taken {
				t.Fatalf("another owner never got the key after the restart")
			}
			live := held.Err() == nil
			t.Logf("another owner took the key %v after the restart; first holder's context still live: %v", time.Since(start).Round(time.Millisecond), live)
			if tc.delayed && live {
				t.Fatal("two holders at once although the restarted nodes were kept out for one lease")
			}
			if !tc.delayed && !live {
				t.Fatal("the first holder already knew of its loss: the hole this test shows did not open")
			}
		})
	}
}
