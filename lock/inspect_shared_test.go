package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Inspect and List of semaphores and read-write locks: the kind, the
// limit, the live holders and the queue, as Redis has them.

// holdAsync starts acquire on a goroutine and returns its outcome's
// channel; the hold is released when release is closed.
func holdAsync(t *testing.T, acquire func(context.Context) (context.Context, lock.UnlockFunc, error), release <-chan struct{}) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() {
		_, unlock, err := acquire(ctx)
		if err == nil {
			<-release
			err = unlock()
		}
		done <- err
	}()
	return done
}

// checkLease fails the test unless d is within the last second of lease.
func checkLease(t *testing.T, what string, d, lease time.Duration) {
	t.Helper()
	if d <= lease-time.Second || d > lease {
		t.Errorf("%s: remaining lease %v, want within a second under %v", what, d, lease)
	}
}

func TestInspectSemaphoreShowsPermitsOfLimitAndQueue(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	key := "sem-" + randKey()
	a := locktest.NewClient(t, rdb, lock.WithOwnerLabel("a"))
	b := locktest.NewClient(t, rdb, lock.WithOwnerLabel("b"))
	w := locktest.NewClient(t, rdb, lock.WithOwnerLabel("w"))
	lease := lock.WithLease(10 * time.Second)

	actx, unlockA, err := a.Acquire(ctx, key, 2, lease)
	if err != nil {
		t.Fatal(err)
	}
	_, unlockA2, err := a.Acquire(actx, key, 2) // a re-entry: no second permit
	if err != nil {
		t.Fatal(err)
	}
	bctx, unlockB, err := b.Acquire(ctx, key, 2, lease)
	if err != nil {
		t.Fatal(err)
	}
	tokA, _ := lock.FencingToken(actx, key)
	tokB, _ := lock.FencingToken(bctx, key)
	release := make(chan struct{})
	defer close(release)
	holdAsync(t, func(ctx context.Context) (context.Context, lock.UnlockFunc, error) {
		return w.Acquire(ctx, key, 2)
	}, release)
	waitQueued(t, rdb, key, 1)

	info, err := a.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != lock.KindSemaphore || info.Limit != 2 || !info.Held || info.Holding != 2 || len(info.Permits) != 2 {
		t.Fatalf("%+v: want a semaphore of limit 2, 2 permits held", info)
	}
	pa, pb := info.Permits[0], info.Permits[1]
	if pa.Owner.Label != "a" || pa.HoldCount != 2 || pa.Token != tokA || pa.Write ||
		pb.Owner.Label != "b" || pb.HoldCount != 1 || pb.Token != tokB || pb.Write {
		t.Fatalf("permits %+v: want a (2 levels, token %d) then b (1 level, token %d)", info.Permits, tokA, tokB)
	}
	checkLease(t, "a", pa.RemainingLease, 10*time.Second)
	checkLease(t, "b", pb.RemainingLease, 10*time.Second)
	if info.Holder.ID != "" || info.HoldCount != 0 || info.Token != tokB || info.Reserved {
		t.Fatalf("%+v: want no single holder, last token %d, not reserved", info, tokB)
	}
	if info.Waiting != 1 || len(info.Waiters) != 1 || info.Waiters[0].Owner.Label != "w" || info.Waiters[0].Read {
		t.Fatalf("waiters %d %+v: want w queued", info.Waiting, info.Waiters)
	}

	// b's release hands its permit to w: still 2 of 2, w's token next.
	if err := unlockB(); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "w holds a permit", func() bool {
		info, err = a.Inspect(ctx, key)
		return err == nil && info.Holding == 2 && info.Permits[1].Owner.Label == "w"
	})
	if info.Waiting != 0 || info.Permits[1].Token != tokB+1 || info.LastReleasedBy.Label != "b" || info.Forced {
		t.Fatalf("after b's release: %+v, want w with token %d, released by b", info, tokB+1)
	}
	_ = unlockA2()
	_ = unlockA()
}

func TestInspectReadWriteShowsReadersQueuedWriterThenWriter(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	key := "rw-" + randKey()
	r1 := locktest.NewClient(t, rdb, lock.WithOwnerLabel("r1"))
	r2 := locktest.NewClient(t, rdb, lock.WithOwnerLabel("r2"))
	wr := locktest.NewClient(t, rdb, lock.WithOwnerLabel("writer"))
	late := locktest.NewClient(t, rdb, lock.WithOwnerLabel("late"))

	_, unlock1, err := r1.RLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_, unlock2, err := r2.RLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	holdAsync(t, func(ctx context.Context) (context.Context, lock.UnlockFunc, error) {
		return wr.Lock(ctx, key, lock.WithLease(10*time.Second))
	}, release)
	waitQueued(t, rdb, key, 1)
	holdAsync(t, func(ctx context.Context) (context.Context, lock.UnlockFunc, error) {
		return late.RLock(ctx, key)
	}, release)
	waitQueued(t, rdb, key, 2)

	info, err := r1.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != lock.KindReadWrite || info.Limit != 0 || !info.Held || info.Holding != 2 || len(info.Permits) != 2 ||
		info.Permits[0].Owner.Label != "r1" || info.Permits[1].Owner.Label != "r2" || info.Permits[0].Write || info.Permits[1].Write {
		t.Fatalf("%+v: want a read-write lock read by r1 and r2", info)
	}
	if info.Holder.ID != "" || info.Waiting != 2 || len(info.Waiters) != 2 ||
		info.Waiters[0].Owner.Label != "writer" || info.Waiters[0].Read ||
		info.Waiters[1].Owner.Label != "late" || !info.Waiters[1].Read {
		t.Fatalf("%+v: want no writer, writer then reader late queued", info)
	}

	_ = unlock1()
	_ = unlock2()
	locktest.Eventually(t, 5*time.Second, "the writer holds the key", func() bool {
		info, err = r1.Inspect(ctx, key)
		return err == nil && info.Holder.Label == "writer"
	})
	if info.Holding != 1 || len(info.Permits) != 1 || !info.Permits[0].Write || info.HoldCount != 1 ||
		info.RemainingLease != info.Permits[0].RemainingLease {
		t.Fatalf("%+v: want the writer alone, its lease as the holder's", info)
	}
	if info.Waiting != 1 || len(info.Waiters) != 1 || info.Waiters[0].Owner.Label != "late" || !info.Waiters[0].Read {
		t.Fatalf("waiters %+v: want the reader late", info.Waiters)
	}
}

// sharedHolder is share.lua's field value of a holder: kind, hold count,
// token and lease end in ms of Redis's clock.
func sharedHolder(kind string, count int, token uint64, end time.Time) string {
	return fmt.Sprintf("%s %d %d %d", kind, count, token, end.UnixMilli())
}

func TestInspectSharedListsLiveHoldersOldestFirstUpToMax(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb)
	key := "many-" + randKey()
	name := "lockkit:{" + key + "}"
	now := time.Now() // redistest's server runs on this machine's clock
	const live = lock.MaxListedPermits + 5
	fields := []any{"k", "s1000", "t", 9000}
	for i := range live {
		// Tokens from high to low, so that field order is not token order.
		fields = append(fields, fmt.Sprintf("=ab@h:1:o%d:1", i), sharedHolder("p", 1, uint64(8000-i), now.Add(time.Minute)))
	}
	for i := range 3 { // lapsed: not counted, not listed
		fields = append(fields, fmt.Sprintf("=ab@h:1:dead%d:1", i), sharedHolder("p", 1, uint64(i+1), now.Add(-time.Second)))
	}
	if err := rdb.HSet(ctx, name, fields...).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, name, time.Minute)

	info, err := c.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != lock.KindSemaphore || info.Limit != 1000 || info.Holding != live || len(info.Permits) != lock.MaxListedPermits || info.Token != 9000 {
		t.Fatalf("kind %q limit %d holding %d listed %d token %d: want semaphore, 1000, %d, %d, 9000",
			info.Kind, info.Limit, info.Holding, len(info.Permits), info.Token, live, lock.MaxListedPermits)
	}
	for i, p := range info.Permits {
		if p.Owner.Label[:1] != "o" || (i > 0 && p.Token <= info.Permits[i-1].Token) {
			t.Fatalf("permit %d: %+v: want a live holder, tokens ascending", i, p)
		}
	}
}

func TestListShowsSemaphoresAndReadWriteLocksWithHolders(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb, lock.WithPrefix("shared"))
	_, unlockS, err := c.Acquire(ctx, "s:1", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer unlockS()
	_, unlockR, err := c.RLock(ctx, "r:1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlockR()
	_, unlockGone, err := c.Acquire(ctx, "s:gone", 4)
	if err != nil {
		t.Fatal(err)
	}
	_ = unlockGone() // its hash lingers a moment, with no holder

	got := map[string]lock.LockInfo{}
	for info, err := range c.List(ctx, "*") {
		if err != nil {
			t.Fatal(err)
		}
		got[info.Key] = info
	}
	if len(got) != 2 {
		t.Fatalf("listed %v: want s:1 and r:1", got)
	}
	if s := got["s:1"]; s.Kind != lock.KindSemaphore || s.Limit != 4 || s.Holding != 1 || len(s.Permits) != 1 {
		t.Fatalf("s:1: %+v", s)
	}
	if r := got["r:1"]; r.Kind != lock.KindReadWrite || r.Holding != 1 || len(r.Permits) != 1 || r.Permits[0].Write {
		t.Fatalf("r:1: %+v", r)
	}
}
