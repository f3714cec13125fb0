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

// fill writes values to rdb until Redis refuses even a small one with
// OOM, and returns the keys written.
func fill(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	for _, size := range []int{4096, 64} {
		value := strings.Repeat("x", size)
		for i := 0; ; i++ {
			if i == 100_000 {
				t.Fatal("Redis never ran out of memory")
			}
			k := "fill:" + strconv.Itoa(size) + ":" + strconv.Itoa(i)
			err := rdb.Set(ctx, k, value, 0).Err()
			if redis.HasErrorPrefix(err, "OOM") {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
	}
	return keys
}

// A Redis full with the noeviction policy refuses new locks with an error
// that says so (ErrOutOfMemory), while held locks keep renewing and their
// unlock still releases: nothing is silently lost, and locking works again
// once memory is freed.
func TestOutOfMemory(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb, lock.WithDefaultLease(600*time.Millisecond))
	ctx := context.Background()
	held, unlock := locktest.MustLock(t, c, ctx, "held")
	filled := fill(t, rdb)

	_, _, err := c.Lock(ctx, "new", lock.WithMaxWait(time.Second))
	if !errors.Is(err, lock.ErrOutOfMemory) || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("Lock on a full Redis = %v, want ErrOutOfMemory", err)
	}
	if _, _, err := c.TryLock(ctx, "new"); !errors.Is(err, lock.ErrOutOfMemory) {
		t.Fatalf("TryLock on a full Redis = %v, want ErrOutOfMemory", err)
	}
	time.Sleep(1500 * time.Millisecond) // 2.5 leases: only renewals keep it
	if held.Err() != nil {
		t.Fatalf("held lock lost on a full Redis: %v", context.Cause(held))
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock on a full Redis = %v, want nil", err)
	}
	if locktest.Held(t, rdb, "lockkit:{held}") {
		t.Fatal("key still held after its unlock on a full Redis")
	}

	if err := rdb.Del(ctx, filled[:len(filled)/2]...).Err(); err != nil {
		t.Fatal(err)
	}
	_, unlockNew := locktest.MustLock(t, c, ctx, "new", lock.WithMaxWait(time.Second))
	if err := unlockNew(); err != nil {
		t.Fatal(err)
	}
}
