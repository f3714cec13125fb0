package lock_test

import (
	"context"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// maxLockUnlockAllocs is the most allocations an uncontended Lock and its
// unlock may make, the Redis client's included (about half of them: its
// connection check, commands and replies).
const maxLockUnlockAllocs = 30

// An uncontended Lock and unlock of a Client without options stays within
// maxLockUnlockAllocs allocations. Not parallel: the count is the whole
// process's.
func TestLockUnlockAllocations(t *testing.T) {
	_, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	pair := func() {
		_, unlock, err := c.Lock(ctx, "allocs")
		if err != nil {
			t.Fatal(err)
		}
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
	}
	pair() // the scripts loaded, the connection made
	if n := testing.AllocsPerRun(200, pair); n > maxLockUnlockAllocs {
		t.Errorf("%.1f allocations per Lock and unlock, want at most %d", n, maxLockUnlockAllocs)
	}
}
