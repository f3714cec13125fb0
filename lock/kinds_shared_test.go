package lock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Kinds: a key is a lock, a semaphore of one limit or a read-write lock
// while Redis keeps it; a call of another kind or limit gets an error
// wrapping ErrInvalid and changes nothing.

func TestKindsSemaphoreRefusesAnotherLimitAndKind(t *testing.T) {
	srv, rdb := newReal(t)
	c := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	key := "sem-" + randKey()
	_, unlock, err := c.Acquire(ctx, key, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, _, err := c.TryAcquire(ctx, key, 4); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("another limit: %v", err)
	} else {
		t.Log(err)
	}
	if _, _, err := c.TryLock(ctx, key); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Lock of a semaphore: %v", err)
	} else {
		t.Log(err)
	}
	if _, _, err := c.TryRLock(ctx, key); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("RLock of a semaphore: %v", err)
	} else {
		t.Log(err)
	}
	if _, _, err := c.Acquire(ctx, key, 0); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("limit 0: %v", err)
	}
	// Nothing changed: the kind, the limit and the one holder.
	h, err := rdb.HGetAll(ctx, "lockkit:{"+key+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	holders := 0
	for f := range h {
		if f[0] == '=' {
			holders++
		}
	}
	if h["k"] != "s3" || holders != 1 {
		t.Errorf("after the refusals the hash is %v", h)
	}
}

func TestKindsSemaphoreOfAHeldLockIsRefused(t *testing.T) {
	srv, _ := newReal(t)
	c := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	key := "lock-" + randKey()
	lctx, unlock, err := c.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.TryAcquire(context.Background(), key, 2); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("a semaphore of a held lock: %v", err)
	}
	if err := unlock(); err != nil || lctx.Err() == nil {
		t.Errorf("the lock after the refusal: unlock %v, context %v", err, lctx.Err())
	}
}

// Quorum mode has no semaphores or read-write locks: the calls say so.
func TestKindsQuorumRefusesSharedHolds(t *testing.T) {
	_, nodes := quorumOf(t, 3)
	c := newQuorum(t, nodes())
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"Acquire":    func() error { _, _, err := c.Acquire(ctx, "q", 2); return err },
		"TryAcquire": func() error { _, _, err := c.TryAcquire(ctx, "q", 2); return err },
		"RLock":      func() error { _, _, err := c.RLock(ctx, "q"); return err },
		"TryRLock":   func() error { _, _, err := c.TryRLock(ctx, "q"); return err },
	} {
		if err := call(); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s in quorum mode: %v", name, err)
		}
	}
}
