package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

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
