package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Inspect: what a key's holder, turn and waiters are, as Redis has them.

// queueWaiters starts n Lock calls of key on c, each on a Client of its
// own labelled w<i>, and waits until Redis has them all queued. Each
// releases the key as soon as it has it.
func queueWaiters(t *testing.T, rdb *redis.Client, key string, n int) []chan error {
	t.Helper()
	return queueHolders(t, rdb, key, n, nil)
}

// queueHolders is queueWaiters whose waiters, once they have the key,
// hold it until release is closed (nil: not at all).
func queueHolders(t *testing.T, rdb *redis.Client, key string, n int, release <-chan struct{}) []chan error {
	t.Helper()
	var done []chan error
	for i := range n {
		w := locktest.NewClient(t, rdb, lock.WithOwnerLabel("w"+string(rune('0'+i))))
		ch := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() {
			_, unlock, err := w.Lock(ctx, key)
			if err == nil {
				if release != nil {
					<-release
				}
				err = unlock()
			}
			ch <- err
		}()
		done = append(done, ch)
		waitQueued(t, rdb, key, int64(i+1))
	}
	return done
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestInspect(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	c := locktest.NewClient(t, rdb, lock.WithOwnerLabel("holder"))
	ctx := context.Background()

	free, err := c.Inspect(ctx, "orders:42")
	if err != nil || free.Held || free.Reserved || free.Waiting != 0 || free.Name != "lockkit:{orders:42}" || free.Key != "orders:42" {
		t.Fatalf("free key: %+v, %v", free, err)
	}

	held, unlock := locktest.MustLock(t, c, ctx, "orders:42", lock.WithLease(10*time.Second))
	_, unlockInner := locktest.MustLock(t, c, held, "orders:42")
	token, _ := lock.FencingToken(held, "orders:42")
	time.Sleep(20 * time.Millisecond) // so that the waiters have waited a measurable time
	release := make(chan struct{})
	defer close(release)
	queueHolders(t, rdb, "orders:42", 2, release)
	time.Sleep(30 * time.Millisecond)

	info, err := c.Inspect(ctx, "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Holder.Label != "holder" || info.HoldCount != 2 || info.Token != token {
		t.Fatalf("held: %+v, want holder labelled holder, count 2, token %d", info, token)
	}
	if info.RemainingLease <= 9*time.Second || info.RemainingLease > 10*time.Second {
		t.Fatalf("remaining lease %v, want just under 10 s", info.RemainingLease)
	}
	if info.Waiting != 2 || len(info.Waiters) != 2 || info.Waiters[0].Owner.Label != "w0" || info.Waiters[1].Owner.Label != "w1" {
		t.Fatalf("waiters: %d %+v, want w0 then w1", info.Waiting, info.Waiters)
	}
	if w := info.Waiters[0]; w.Waited < 30*time.Millisecond || w.Waited > 5*time.Second || w.Waited < info.Waiters[1].Waited {
		t.Fatalf("waited %v and %v: want at least 30 ms, the first longer", w.Waited, info.Waiters[1].Waited)
	}
	if info.Reserved {
		t.Fatal("a held key reported reserved")
	}
	_ = unlockInner()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	// The key went to w0: held by it, w1 still queued (w0 stays first
	// until it confirms, then leaves the queue).
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err = c.Inspect(ctx, "orders:42")
		if err != nil {
			t.Fatal(err)
		}
		if info.Held && info.Holder.Label == "w0" || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !info.Held || info.Holder.Label != "w0" || info.Token != token+1 || info.LastReleasedBy.Label != "holder" || info.Forced {
		t.Fatalf("after the release: %+v, want w0 holding with token %d, released by holder", info, token+1)
	}
}

func TestInspectReserved(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	// A free key whose queue has a live waiter: its turn (as after a
	// waiter that missed its turn was dropped).
	now := time.Now()
	owner := "ab@web-9:7:queued:1"
	mr.HSet("lockkit:{r}", "n", "0", "t", "5", "q", "1")
	_, _ = mr.Lpush("lockkit:{r}:queue", owner)
	mr.HSet("lockkit:{r}:waits", owner, itoa(now.Add(800*time.Millisecond).UnixMilli()), ">"+owner, itoa(now.Add(-2*time.Second).UnixMilli()))
	info, err := c.Inspect(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held || !info.Reserved || info.ReservedFor.Label != "queued" || info.TurnLeft <= 0 || info.TurnLeft > 800*time.Millisecond {
		t.Fatalf("%+v: want free, reserved for queued for up to 800 ms", info)
	}
	if len(info.Waiters) != 1 || info.Waiters[0].Waited < 2*time.Second || info.Waiters[0].Waited > 3*time.Second {
		t.Fatalf("waiters %+v: want one that waited 2 s", info.Waiters)
	}
	if _, _, err := c.TryLock(ctx, "r"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock of a reserved key: %v", err)
	}
}

func TestInspectBadInput(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	for _, key := range []string{"", strings.Repeat("k", lock.MaxKeyLen+1)} {
		if _, err := c.Inspect(ctx, key); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("Inspect(%d bytes): %v, want ErrInvalid", len(key), err)
		}
		if _, err := c.ForceUnlock(ctx, key); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("ForceUnlock(%d bytes): %v, want ErrInvalid", len(key), err)
		}
	}
	for _, pattern := range []string{"", "[", strings.Repeat("k", lock.MaxKeyLen+1)} {
		for _, err := range c.List(ctx, pattern) {
			if !errors.Is(err, lock.ErrInvalid) {
				t.Errorf("Held(%.10q): %v, want ErrInvalid", pattern, err)
			}
		}
	}
	_ = c.Close()
	if _, err := c.Inspect(ctx, "k"); err != lock.ErrClosed {
		t.Errorf("Inspect after Close: %v", err)
	}
	if _, err := c.ForceUnlock(ctx, "k"); err != lock.ErrClosed {
		t.Errorf("ForceUnlock after Close: %v", err)
	}
	for _, err := range c.List(ctx, "*") {
		if err != lock.ErrClosed && !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Held after Close: %v", err)
		}
	}
}

// TestInspectTurnSkipsDeadClientsWaiters: a waiter that missed its turn
// marks its Client dead, and the next attempt drops every waiter of that
// Client (queue.lua's first); Inspect applies the same rule and reports
// the turn of the live waiter behind them.
func TestInspectTurnSkipsDeadClientsWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	tm, _ := rdb.Time(ctx).Result()
	now := tm.UnixMilli()
	name := "lockkit:{turn}"
	// A process died with two queued waiters; a live one waits behind them.
	a1, a2, b1 := "deadA@h:1:1", "deadA@h:1:2", "liveB@h:2:1"
	rdb.RPush(ctx, name+":queue", a1, a2, b1)
	rdb.HSet(ctx, name+":waits", a1, now-10, ">"+a1, now-5000, a2, now+20000, ">"+a2, now-4000, b1, now+20000, ">"+b1, now-3000)
	rdb.PExpire(ctx, name+":queue", 30*time.Second)
	rdb.PExpire(ctx, name+":waits", 30*time.Second)

	info, err := c.Inspect(ctx, "turn")
	if err != nil {
		t.Fatal(err)
	}
	// What Redis does on the next attempt: a2 is dropped with a1.
	if _, _, err := c.TryLock(ctx, "turn"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock: %v", err)
	}
	after, _ := c.Inspect(ctx, "turn")
	if info.ReservedFor.ID != b1 {
		t.Fatalf("Inspect: reserved for %q (turn left %v), but the next attempt gives the turn to %q (then Inspect says %q)", info.ReservedFor.ID, info.TurnLeft, b1, after.ReservedFor.ID)
	}
}
