package lock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestLockUnlock(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()

	lctx, unlock := locktest.MustLock(t, c, ctx, "orders:42")
	if !lock.Held(lctx, "orders:42") {
		t.Fatal("Held(lock ctx) = false")
	}
	if lock.Held(ctx, "orders:42") {
		t.Fatal("Held(parent ctx) = true")
	}
	if !locktest.Held(t, rdb, "lockkit:{orders:42}") {
		t.Fatalf("lock key missing; keys %v", mr.Keys())
	}
	if ttl := mr.TTL("lockkit:{orders:42}"); ttl > lock.DefaultLease || ttl < lock.DefaultLease-5*time.Second {
		t.Fatalf("TTL = %v, want the lease, %v", ttl, lock.DefaultLease)
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if locktest.Held(t, rdb, "lockkit:{orders:42}") {
		t.Fatal("lock key still there after unlock")
	}
	if lctx.Err() == nil {
		t.Fatal("lock ctx not cancelled after unlock")
	}
	if ctx.Err() != nil {
		t.Fatal("parent ctx cancelled by unlock")
	}
	if lock.Held(lctx, "orders:42") {
		t.Fatal("Held after unlock")
	}
	if err := unlock(); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second unlock = %v, want ErrNotHeld", err)
	}
}

func TestTryLockContended(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "k", lock.WithLease(10*time.Second))
	defer unlock()

	cc := locktest.CountCommands(rdb)
	_, _, err := c.TryLock(ctx, "k")
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock = %v, want ErrNotObtained", err)
	}
	var ne *lock.NotObtainedError
	if !errors.As(err, &ne) || ne.RemainingLease <= 9*time.Second || ne.RemainingLease > 10*time.Second {
		t.Fatalf("TryLock error %#v: want RemainingLease in (9s, 10s]", ne)
	}
	if n := cc.N(); n != 1 {
		t.Fatalf("TryLock sent %d commands, want 1", n)
	}
}

func TestReentry(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()

	outer, unlockOuter := locktest.MustLock(t, c, ctx, "k")
	done := make(chan struct{})
	var inner context.Context
	var unlockInner lock.UnlockFunc
	go func() { // a goroutine with the held ctx acts for the holder
		defer close(done)
		inner, unlockInner = locktest.MustLock(t, c, outer, "k", lock.WithMaxWait(time.Second))
	}()
	locktest.Within(t, done, 2*time.Second, "re-entry")
	if got := countOf(t, mr, "k"); got != "2" {
		t.Fatalf("hold count = %q, want 2", got)
	}
	t1, _ := lock.FencingToken(outer, "k")
	t2, _ := lock.FencingToken(inner, "k")
	if t1 != t2 {
		t.Fatalf("re-entry token %d, outer %d: want equal", t2, t1)
	}

	// A sibling of the holder contends.
	if _, _, err := c.TryLock(ctx, "k"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("sibling TryLock = %v, want ErrNotObtained", err)
	}
	if err := unlockInner(); err != nil {
		t.Fatalf("unlock inner: %v", err)
	}
	if err := unlockInner(); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("double unlock inner = %v, want ErrNotHeld", err)
	}
	if !locktest.Held(t, rdb, "lockkit:{k}") || !lock.Held(outer, "k") {
		t.Fatal("key released before the outermost unlock")
	}
	if inner.Err() == nil {
		t.Fatal("inner ctx not cancelled by its unlock")
	}
	if err := unlockOuter(); err != nil {
		t.Fatalf("unlock outer: %v", err)
	}
	if locktest.Held(t, rdb, "lockkit:{k}") {
		t.Fatal("key kept after the outermost unlock")
	}
}

// countOf returns the hold count of key's holder in Redis.
func countOf(t *testing.T, mr *locktest.Redis, key string) string {
	t.Helper()
	name := "lockkit:{" + key + "}"
	if o := mr.HGet(name, "o"); o == "" {
		t.Fatalf("no owner of %q", key)
	}
	return mr.HGet(name, "n")
}

func TestHoldingOtherKeysStillContends(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	a, unlockA := locktest.MustLock(t, c, ctx, "a")
	defer unlockA()
	_, unlockB := locktest.MustLock(t, c, ctx, "b")
	defer unlockB()
	if _, _, err := c.TryLock(a, "b"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("holder of a TryLock(b) = %v, want ErrNotObtained", err)
	}
	// A context holding two keys holds both.
	ab, unlockAB := locktest.MustLock(t, c, a, "c")
	defer unlockAB()
	if !lock.Held(ab, "a") || !lock.Held(ab, "c") {
		t.Fatal("nested holds of different keys not both held")
	}
}

func TestUnlockWithCancelledContext(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx, cancel := context.WithCancel(context.Background())
	_, unlock := locktest.MustLock(t, c, ctx, "k")
	cancel()
	if err := unlock(); err != nil {
		t.Fatalf("unlock after cancel: %v", err)
	}
	if locktest.Held(t, rdb, "lockkit:{k}") {
		t.Fatal("key kept")
	}
}

func TestLockWaitLimitAndCancel(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "k")
	defer unlock()

	_, _, err := c.Lock(ctx, "k", lock.WithMaxWait(50*time.Millisecond))
	if !errors.Is(err, lock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait limit: %v, want ErrNotObtained alone", err)
	}

	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, _, err = c.Lock(cctx, "k")
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx deadline: %v, want ErrNotObtained and DeadlineExceeded", err)
	}

	done, stop := context.WithCancel(ctx)
	stop()
	_, _, err = c.Lock(done, "k2")
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx: %v, want ErrNotObtained and Canceled", err)
	}
}

func TestKeysStayDistinct(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	long := strings.Repeat("x", 10<<10)
	keys := []string{
		"a", "a:b", "a}b", "a{b", "{a}", "{a}b", "a%7Db", "a%b", "%h00",
		"ключ", "🔒", long, long + "y", strings.Repeat("y", 128), strings.Repeat("y", 129),
	}
	var unlocks []lock.UnlockFunc
	for _, k := range keys {
		_, unlock, err := c.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("TryLock(%.20q): %v", k, err)
		}
		unlocks = append(unlocks, unlock)
	}
	for _, k := range keys { // each is now held: a second owner is refused
		if _, _, err := c.TryLock(ctx, k); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("second TryLock(%.20q) = %v, want ErrNotObtained", k, err)
		}
	}
	for _, u := range unlocks {
		if err := u(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRedisKeySizeBounded(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	_, unlock := locktest.MustLock(t, c, context.Background(), strings.Repeat("z", lock.MaxKeyLen))
	defer unlock()
	for _, k := range mr.Keys() {
		if len(k) > 100 {
			t.Errorf("Redis key of %d bytes: %.40q...", len(k), k)
		}
	}
}

func TestConcurrentUnlockCalls(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	_, unlock := locktest.MustLock(t, c, context.Background(), "k")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- unlock()
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, lock.ErrNotHeld):
			t.Fatalf("unlock: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d unlocks succeeded, want 1", ok)
	}
}
