package lock_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Re-entry, limits and kinds of shared holds (issue 33): a context that
// holds key re-enters instead of taking a second permit; the writer takes
// read holds of its key; a reader asking for the write lock, a call with
// another limit than the holders', and a key used as another kind are
// refused at once with ErrInvalid, naming what the key is, and change
// nothing in Redis.

// The writer takes read holds of its key, also when the key became a
// read-write lock's while it held it as a plain Lock; the unlocks of those
// read levels keep the write lock, whose own unlock (the last) lets the
// queued reader in.
func TestReentryWriterReadHoldsAndQueuedReaders(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	key := "sh-wre-" + randKey()
	wctx, wunlock := locktest.MustLock(t, a, ctx, key)
	_, r1unlock, err := a.RLock(wctx, key)
	if err != nil {
		t.Fatal("the writer's read hold of a plain Lock:", err)
	}
	rdone := make(chan struct{})
	var rerr error
	go func() { // converts the key
		defer close(rdone)
		var u lock.UnlockFunc
		_, u, rerr = b.RLock(ctx, key, lock.WithMaxWait(20*time.Second))
		if rerr == nil {
			_ = u()
		}
	}()
	waitQueued(t, rdb, key, 1)
	_, r2unlock, err := a.RLock(wctx, key)
	if err != nil {
		t.Fatal("the writer's read hold of a read-write lock:", err)
	}
	for i, u := range []lock.UnlockFunc{r1unlock, r2unlock} {
		if err := u(); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
		select {
		case <-rdone:
			t.Fatalf("the reader got in while the writer still held its key (unlock %d of a read level)", i)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if wctx.Err() != nil {
		t.Fatalf("the write lock ended with its read levels: %v", context.Cause(wctx))
	}
	if err := wunlock(); err != nil {
		t.Fatal(err)
	}
	locktest.Within(t, rdone, locktest.Bound(5*time.Second), "the reader after the writer's last unlock")
	if rerr != nil {
		t.Fatal(rerr)
	}
}

// hashOf is everything Redis keeps of key: its hash, queue and waits.
func hashOf(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	ctx := context.Background()
	base := "lockkit:{" + key + "}"
	h := rdb.HGetAll(ctx, base).Val()
	delete(h, "t") // a token is not state a refusal could change
	return strings.Join([]string{
		formatMap(h), strings.Join(rdb.LRange(ctx, base+":queue", 0, -1).Val(), ","), formatMap(rdb.HGetAll(ctx, base+":waits").Val()),
	}, " | ")
}

func formatMap(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(k + "=" + m[k] + ";")
	}
	return b.String()
}

// Refusals: each returns ErrInvalid within a second (a blocking call does
// not wait for the key), names the key's kind (and both limits), and
// leaves the key's hash, queue and waits as they were.
func TestKindsRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	sem, rw, plain := "sh-ref-s-"+randKey(), "sh-ref-rw-"+randKey(), "sh-ref-l-"+randKey()
	// sem: 3 permits held, one waiter; rw: a reader holds, a writer waits;
	// plain: a Lock holds, a Lock waits.
	for range 3 {
		if _, _, err := a.Acquire(ctx, sem, 3); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _, _, _ = b.Acquire(ctx, sem, 3, lock.WithMaxWait(time.Minute)) }()
	waitQueued(t, rdb, sem, 1)
	rctx, _, err := a.RLock(ctx, rw)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _, _ = b.Lock(ctx, rw, lock.WithMaxWait(time.Minute)) }()
	waitQueued(t, rdb, rw, 1)
	_, _ = locktest.MustLock(t, a, ctx, plain)
	go func() { _, _, _ = b.Lock(ctx, plain, lock.WithMaxWait(time.Minute)) }()
	waitQueued(t, rdb, plain, 1)

	type call struct {
		name, key string
		f         func(context.Context) error
		want      []string // in the error
	}
	e := func(_ context.Context, _ lock.UnlockFunc, err error) error { return err }
	calls := []call{
		{"Acquire with another limit", sem, func(c context.Context) error { return e(b.Acquire(c, sem, 4)) }, []string{"3", "4"}},
		{"TryAcquire with another limit", sem, func(c context.Context) error { return e(b.TryAcquire(c, sem, 1)) }, []string{"3", "1"}},
		{"Lock of a semaphore", sem, func(c context.Context) error { return e(b.Lock(c, sem)) }, []string{"semaphore"}},
		{"RLock of a semaphore", sem, func(c context.Context) error { return e(b.RLock(c, sem)) }, []string{"semaphore"}},
		{"Acquire of a read-write lock", rw, func(c context.Context) error { return e(b.Acquire(c, rw, 2)) }, []string{"read-write"}},
		{"the reader's Lock of its key", rw, func(context.Context) error { return e(a.Lock(rctx, rw)) }, []string{"read"}},
		{"the reader's Acquire of its key", rw, func(context.Context) error { return e(a.Acquire(rctx, rw, 1)) }, nil},
		{"Acquire of a held Lock", plain, func(c context.Context) error { return e(b.Acquire(c, plain, 2)) }, []string{"lock"}},
	}
	for _, c := range calls {
		before := hashOf(t, rdb, c.key)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		err := c.f(cctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s: %v after %v, want ErrInvalid at once", c.name, err, took)
			continue
		}
		if took > locktest.Bound(250*time.Millisecond) {
			t.Errorf("%s: refused after %v, want at once", c.name, took)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", c.name, err, w)
			}
		}
		if after := hashOf(t, rdb, c.key); after != before {
			t.Errorf("%s changed the key:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}
}

// A reader re-enters its read hold while a writer is queued behind it:
// at once (the queued writer does not hold up a re-entry, which would
// deadlock), and the writer gets in after both levels are unlocked.
func TestReentryReaderReentersPastQueuedWriter(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	key := "sh-rre-" + randKey()
	rctx, ru, err := a.RLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	done, res := lockAsync(b, ctx, key, lock.WithMaxWait(20*time.Second))
	waitQueued(t, rdb, key, 1)
	ictx, cancel := context.WithTimeout(rctx, locktest.Bound(time.Second))
	defer cancel()
	_, iu, err := a.RLock(ictx, key)
	if err != nil {
		t.Fatalf("the reader's re-entry with a writer queued: %v", err)
	}
	_ = iu()
	select {
	case <-done:
		t.Fatalf("the writer got in while the reader held (err %v)", res.err)
	case <-time.After(200 * time.Millisecond):
	}
	_ = ru()
	acquired(t, done, res, "the writer after the reader")
}
