package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Re-entry of shared holds: a context that holds a key re-enters its own
// hold (no second permit); a reader asking for the write lock of its key
// is refused at once; the writer takes read holds of its key.

func TestReentryPermitTakesNoSecondPermit(t *testing.T) {
	srv, _ := newReal(t)
	c := locktest.NewClient(t, srv.Client(t))
	other := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	key := "re-sem-" + randKey()
	pctx, u1, err := c.Acquire(ctx, key, 2)
	if err != nil {
		t.Fatal(err)
	}
	inner, u2, err := c.Acquire(pctx, key, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The second permit is still free for another owner.
	_, u3, err := other.TryAcquire(ctx, key, 2)
	if err != nil {
		t.Fatalf("the re-entry took a second permit: %v", err)
	}
	if tok1, _ := lock.FencingToken(pctx, key); tok1 == 0 || tok1 != token(inner, key) {
		t.Errorf("re-entry token %d, outer %d", token(inner, key), tok1)
	}
	if _, _, err := c.Acquire(pctx, key, 3); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("re-entry with another limit: %v", err)
	}
	if _, _, err := c.Lock(pctx, key); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("a permit's holder asking for a lock: %v", err)
	}
	for _, u := range []lock.UnlockFunc{u2, u1, u3} {
		if err := u(); err != nil {
			t.Error(err)
		}
	}
}

func TestReentryReaderAskingForWriteLockIsRefused(t *testing.T) {
	srv, _ := newReal(t)
	c := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	key := "re-rw-" + randKey()
	rctx, ru, err := c.RLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(rctx, locktest.Bound(time.Second))
	defer cancel()
	d := timed(func() { _, _, err = c.Lock(wctx, key) })
	if !errors.Is(err, lock.ErrInvalid) || d > locktest.Bound(100*time.Millisecond) {
		t.Errorf("a reader's Lock of its key: %v after %v", err, d)
	}
	// A read re-entry is fine, and keeps the hold count.
	_, ru2, err := c.RLock(rctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_ = ru2()
	if err := ru(); err != nil {
		t.Error(err)
	}
}

func TestReentryWriterTakesReadHoldsOfItsKey(t *testing.T) {
	srv, _ := newReal(t)
	c := locktest.NewClient(t, srv.Client(t))
	other := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	key := "re-w-" + randKey()
	wctx, wu, err := c.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	rctx, ru, err := c.RLock(wctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if token(rctx, key) == 0 || token(rctx, key) != token(wctx, key) {
		t.Error("the writer's read hold is not its own hold")
	}
	if _, _, err := other.TryRLock(ctx, key); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("another reader with the writer holding: %v", err)
	}
	_ = ru()
	if err := wu(); err != nil {
		t.Error(err)
	}
	if _, u, err := other.TryRLock(ctx, key); err != nil {
		t.Errorf("a reader after the writer: %v", err)
	} else {
		_ = u()
	}
}

// token is ctx's fencing token of key, 0 if none.
func token(ctx context.Context, key string) uint64 {
	tok, _ := lock.FencingToken(ctx, key)
	return tok
}
