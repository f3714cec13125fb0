package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// The contexts of a hold and its levels: derived from the caller's, done
// when the hold ends, and done before unlock returns.

type callerValue struct{}

// A level's context (a struct of the level that implements
// Value, not a context.WithValue): contexts derived by the user
// (WithCancel, WithValue, WithoutCancel, AfterFunc) see the hold and its
// end: nil cause after unlock, ErrLost after loss, ErrClosed after Close;
// Held and FencingToken follow the hold through every one of them, and a
// derived context re-enters and holds a second key.
func TestLevelContextsDerivedByTheCaller(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.WithValue(context.Background(), callerValue{}, "v")
	c := locktest.NewClient(t, srv.Client(t))

	type derived struct {
		cancelled, value, without context.Context
		fired                     chan struct{}
	}
	derive := func(lctx context.Context) derived {
		d := derived{fired: make(chan struct{})}
		var cancel context.CancelFunc
		d.cancelled, cancel = context.WithCancel(lctx)
		t.Cleanup(cancel)
		d.value = context.WithValue(lctx, callerValue{}, "w")
		d.without = context.WithoutCancel(lctx)
		context.AfterFunc(lctx, func() { close(d.fired) })
		return d
	}
	check := func(what, key string, d derived, want error) {
		t.Helper()
		locktest.Within(t, d.fired, 3*time.Second, what+": AfterFunc")
		for _, x := range []context.Context{d.cancelled, d.value} {
			if x.Err() == nil {
				t.Errorf("%s: derived context not cancelled", what)
			}
			if got := context.Cause(x); !errors.Is(got, want) {
				t.Errorf("%s: Cause = %v, want %v", what, got, want)
			}
		}
		if d.without.Err() != nil {
			t.Errorf("%s: WithoutCancel copy cancelled", what)
		}
		for _, x := range []context.Context{d.cancelled, d.value, d.without} {
			if lock.Held(x, key) {
				t.Errorf("%s: Held after the hold ended", what)
			}
			if _, ok := lock.FencingToken(x, key); ok {
				t.Errorf("%s: FencingToken after the hold ended", what)
			}
		}
		if d.value.Value(callerValue{}) != "w" || d.without.Value(callerValue{}) != "v" {
			t.Errorf("%s: values lost through the carrier", what)
		}
	}

	// Unlock: a cause matching ErrNotHeld, and a derived context re-enters.
	key := "carrier-" + randKey()
	lctx, unlock := locktest.MustLock(t, c, ctx, key)
	d := derive(lctx)
	if !lock.Held(d.without, key) || !lock.Held(d.value, key) {
		t.Fatal("derived contexts do not hold the key")
	}
	tok, _ := lock.FencingToken(d.without, key)
	ictx, iunlock, err := c.Lock(d.value, key)
	if err != nil {
		t.Fatal(err)
	}
	if it, _ := lock.FencingToken(ictx, key); it != tok {
		t.Fatalf("re-entry through a derived context: token %d, want %d", it, tok)
	}
	key2 := "carrier2-" + randKey()
	bctx, bunlock, err := c.Lock(ictx, key2)
	if err != nil {
		t.Fatal(err)
	}
	if !lock.Held(bctx, key) || !lock.Held(bctx, key2) {
		t.Fatal("a context holding two keys does not report both")
	}
	if err := bunlock(); err != nil {
		t.Fatal(err)
	}
	if err := iunlock(); err != nil {
		t.Fatal(err)
	}
	if !lock.Held(d.without, key) {
		t.Fatal("the outer level ended with the inner one")
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	check("unlock", key, d, lock.ErrNotHeld)
	if !errors.Is(context.Cause(lctx), lock.ErrNotHeld) {
		t.Errorf("unlock: Cause of the lock context = %v", context.Cause(lctx))
	}
	if ctx.Err() != nil {
		t.Fatal("the outer context was cancelled")
	}

	// Loss: the key deleted under the holder.
	key = "carrier-lost-" + randKey()
	lctx, unlock = locktest.MustLock(t, c, ctx, key, lock.WithLease(time.Second))
	d = derive(lctx)
	if err := rdb.Del(ctx, "lockkit:{"+key+"}").Err(); err != nil {
		t.Fatal(err)
	}
	check("loss", key, d, lock.ErrLost)
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("unlock after loss: %v", err)
	}

	// Close.
	c2, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	key = "carrier-closed-" + randKey()
	lctx, unlock = locktest.MustLock(t, c2, ctx, key)
	d = derive(lctx)
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	check("close", key, d, lock.ErrClosed)
	if err := unlock(); !errors.Is(err, lock.ErrClosed) {
		t.Errorf("unlock after Close: %v", err)
	}
}

func TestHoldUntilUnlock(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv, rdb := newReal(t)
	_ = srv
	c := locktest.NewClient(t, rdb)
	const lease = 300 * time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	lctx, unlock := locktest.MustLock(t, c, ctx, "work", lock.WithLease(lease), lock.WithHoldUntilUnlock())
	token, _ := lock.FencingToken(lctx, "work")
	cancel() // the client went away; the work goes on
	if cause := locktest.Cause(t, lctx, time.Second); cause != context.Canceled {
		t.Fatalf("cause = %v, want context.Canceled", cause)
	}
	time.Sleep(4 * lease) // several leases: only renewals keep the key
	work := context.WithoutCancel(lctx)
	if !lock.Held(work, "work") {
		t.Fatal("Held = false while the hold lives")
	}
	if got, ok := lock.FencingToken(work, "work"); !ok || got != token {
		t.Fatalf("FencingToken = %d, %v; want %d, true", got, ok, token)
	}
	if _, _, err := c.TryLock(context.Background(), "work"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("another caller's TryLock = %v, want ErrNotObtained", err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if locktest.Held(t, rdb, "lockkit:{work}") {
		t.Fatal("key kept after unlock")
	}
}

// Without WithHoldUntilUnlock, renewal stops when the caller's context
// ends and the lease lapses; the hold then reports so everywhere.
func TestParentDoneLeaseLapses(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	c := locktest.NewClient(t, rdb)
	const lease = 300 * time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	lctx, unlock := locktest.MustLock(t, c, ctx, "lapse", lock.WithLease(lease))
	work := context.WithoutCancel(lctx)
	cancel()
	locktest.Eventually(t, 3*lease, "Held false after the caller's context ended", func() bool { return !lock.Held(work, "lapse") })
	if _, ok := lock.FencingToken(work, "lapse"); ok {
		t.Fatal("FencingToken ok after the lease lapsed")
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("unlock after the lease lapsed = %v, want ErrLost", err)
	}
	if _, unlock2, err := c.TryLock(context.Background(), "lapse"); err != nil {
		t.Fatalf("key not free after the lease lapsed: %v", err)
	} else {
		_ = unlock2()
	}
}

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
