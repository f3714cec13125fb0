package gocronlock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestJobNamesKeepTheirOwnLocks locks jobs whose names hold what matters
// to Redis keys and hash tags (braces, colons, globs, spaces, the escape
// '%', names long enough to be hashed, names that differ only there): on
// one Locker all run at once, none takes another's lock; on a second
// Locker each is refused as taken (ErrTickDone). A name too long for a
// lock key fails with an error matching lock.ErrInvalid.
func TestJobNamesKeepTheirOwnLocks(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	long := strings.Repeat("n", 300)
	names := []string{
		"a", "a ", " a", "{a}", "a}", "{a", "a:b", "a:run:b", "run:a", "tick:a", "a*", "*", "a?[b]",
		"a%7Bb%7D", "a{b}", "a%", "%25", "ä", "\x00", long, long + "x", strings.Repeat("{", 200),
	}
	recA, recB := &recorder{}, &recorder{}
	a := newLocker(t, locktest.NewClient(t, rdb), recA, gocronlock.WithMinHold(time.Minute))
	b := newLocker(t, locktest.NewClient(t, rdb), recB, gocronlock.WithMinHold(time.Minute))
	var held []func()
	for _, name := range names {
		ctx, cancel := context.WithCancel(context.Background())
		lk, err := a.Lock(ctx, name)
		if err != nil {
			t.Errorf("Lock(%q) = %v, want a run: another name took its lock", name, err)
			cancel()
			continue
		}
		held = append(held, func() { _ = lk.Unlock(ctx); cancel() })
	}
	for _, name := range names {
		if _, err := b.Lock(context.Background(), name); !errors.Is(err, gocronlock.ErrTickDone) {
			t.Errorf("second replica: Lock(%q) = %v, want ErrTickDone", name, err)
		}
	}
	for _, unlock := range held {
		unlock()
	}
	if n := recA.count(gocronlock.OutcomeRan); n != len(names) {
		t.Errorf("%d runs reported, want %d", n, len(names))
	}
	huge := strings.Repeat("x", lock.MaxKeyLen)
	if _, err := a.Lock(context.Background(), huge); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Lock of a %d-byte name = %v, want lock.ErrInvalid", len(huge), err)
	}
	if all := recA.all(); len(all) == 0 || all[len(all)-1].Outcome != gocronlock.OutcomeFailed || !errors.Is(all[len(all)-1].Err, lock.ErrInvalid) {
		t.Errorf("the huge name's attempt is not reported failed with lock.ErrInvalid")
	}
}

// TestBadOptions checks that impossible options, and a nil *lock.Client,
// are refused by NewLocker (and NewElector) with an error matching
// lock.ErrInvalid, rather than failing every run or panicking in
// gocron's goroutine.
func TestBadOptions(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	c := locktest.NewClient(t, rdb)
	for name, opt := range map[string]gocronlock.Option{
		"zero hold":       gocronlock.WithMinHold(0),
		"negative hold":   gocronlock.WithMinHold(-time.Second),
		"huge hold":       gocronlock.WithMinHold(math.MaxInt64),
		"zero lease":      gocronlock.WithLease(0),
		"negative lease":  gocronlock.WithLease(-time.Second),
		"zero budget":     gocronlock.WithLockBudget(0),
		"negative budget": gocronlock.WithLockBudget(-time.Second),
	} {
		if _, err := gocronlock.NewLocker(c, opt); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s: NewLocker = %v, want lock.ErrInvalid", name, err)
		}
	}
	var nilClient *lock.Client
	if _, err := gocronlock.NewLocker(nilClient); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("NewLocker of a nil *lock.Client = %v, want lock.ErrInvalid", err)
	}
	if _, err := gocronlock.NewElector(nilClient, "x"); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("NewElector of a nil *lock.Client = %v, want lock.ErrInvalid", err)
	}
	// The longest hold accepted works.
	l, err := gocronlock.NewLocker(c, gocronlock.WithMinHold(gocronlock.MaxMinHold), gocronlock.WithLogger(quiet))
	if err != nil {
		t.Fatalf("NewLocker with MaxMinHold: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lk, err := l.Lock(ctx, uniqueName())
	if err != nil {
		t.Fatalf("Lock with MaxMinHold: %v", err)
	}
	_ = lk.Unlock(ctx)
}
