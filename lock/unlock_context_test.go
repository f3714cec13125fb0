package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestUnlockReturnedMeansContextEnded (guarantee 5, UnlockFunc's doc:
// "Afterwards the level's lock context is cancelled with a cause that
// matches ErrNotHeld"): an UnlockFunc that returns ErrNotHeld because the
// level is being unlocked already (a second call of it from another
// goroutine, or the unlock of an inner level while its outer level's
// unlock runs) returns with the level's context still live, while Redis
// is slow to answer the first unlock. After any UnlockFunc returned, the
// context must be done with a cause matching ErrNotHeld.
func TestUnlockReturnedMeansContextEnded(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	c := locktest.NewClient(t, rdb, lock.WithDefaultLease(3*time.Second))
	check := func(what string, ctx context.Context, err error) {
		t.Helper()
		if !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("%s = %v, want ErrNotHeld", what, err)
		}
		if !errors.Is(context.Cause(ctx), lock.ErrNotHeld) {
			t.Errorf("after %s returned %v, the level's context has cause %v (done: %v), want a cause matching ErrNotHeld",
				what, err, context.Cause(ctx), ctx.Err() != nil)
		}
	}
	for _, tc := range []string{"second call of one UnlockFunc", "inner unlock during the outer one"} {
		key := "adv-unlock-" + randKey()
		lctx, unlock := locktest.MustLock(t, c, context.Background(), key)
		ictx, iunlock := locktest.MustLock(t, c, lctx, key)
		srv.Pause() // the first unlock's release waits for Redis
		first := make(chan error, 1)
		go func() { first <- unlock() }()
		// Until the first unlock has marked its levels unlocked (it then
		// waits for Redis).
		locktest.Eventually(t, 5*time.Second, tc+": the first unlock started", func() bool { return !lock.Held(ictx, key) })
		resumed := time.AfterFunc(300*time.Millisecond, srv.Resume)
		start := time.Now()
		switch tc {
		case "second call of one UnlockFunc":
			check(tc, lctx, unlock())
		default:
			check(tc, ictx, iunlock())
		}
		if took := time.Since(start); took > time.Second+locktest.Bound(100*time.Millisecond) {
			t.Errorf("%s took %v, want <= the first unlock's 1 s + 100 ms", tc, took)
		}
		resumed.Stop()
		srv.Resume()
		if err := <-first; err != nil {
			t.Errorf("%s: the first unlock = %v", tc, err)
		}
	}
}
