package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (issue 33, "Re-entry": a context that holds key, the write
// lock included, re-enters it): the writer of a read-write lock re-enters
// its write lock with Lock, as any Lock holder does: the writer that got
// the key after a reader, and a plain Lock holder whose key a reader made
// a read-write lock's (after a release of one of its levels told it so).
//
// A Lock whose key turned out to be a read-write lock's is a write hold
// (shareWrite) that re-enters as a lock.
func TestReentryWriterReentersWithLock(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))

	key := "sh-wlock-" + randKey()
	_, ru, err := a.RLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	done, res := lockAsync(b, ctx, key, lock.WithMaxWait(20*time.Second))
	waitQueued(t, rdb, key, 1)
	_ = ru()
	acquired(t, done, res, "the writer after the reader")
	if _, u, err := b.Lock(res.ctx, key); err != nil {
		t.Errorf("the writer's Lock of its key: %v, want a re-entry", err)
	} else {
		_ = u()
	}

	conv := "sh-wlock-c-" + randKey()
	cctx, cunlock := locktest.MustLock(t, a, ctx, conv)
	_, iu, err := a.Lock(cctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _, _ = b.RLock(ctx, conv, lock.WithMaxWait(20*time.Second)) }()
	waitQueued(t, rdb, conv, 1)  // the key is a read-write lock's now
	if err := iu(); err != nil { // tells the holder so
		t.Fatal(err)
	}
	if _, u, err := a.Lock(cctx, conv); err != nil {
		t.Errorf("the converted Lock holder's Lock of its key: %v, want a re-entry", err)
	} else {
		_ = u()
	}
	_ = cunlock()
}
