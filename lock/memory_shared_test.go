package lock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// What semaphores and read-write locks leave in Redis: every key they
// write has a TTL while in use, and once their holds are released and the
// free hash's linger (1 s at most) is over, nothing: the keys and
// used_memory come back to where they were.

const (
	// sharedMemKeys distinct keys are taken once each; sharedMemWorkers
	// take them in parallel, on one Client.
	sharedMemKeys    = 20_000
	sharedMemWorkers = 8
	// sharedMemLease is the Client's lease; a free key's hash lingers
	// min(lease, 1 s).
	sharedMemLease  = time.Second
	sharedMemLinger = time.Second
	// sharedMemWithin is how far above its start used_memory may stay:
	// the keys themselves take about 230 B each (4.4 MiB for 20,000),
	// so a leak of 13 B per key, such as one small key or a pub/sub
	// channel per key left behind, exceeds it.
	sharedMemWithin = 256 << 10
	// sharedMemEvery: one key in this many has its TTL read while held.
	sharedMemEvery = 50
)

// TestSharedKeysLeaveNoMemoryBehind loads the CPU on purpose: it does not
// run in parallel with other tests (see TestMain).
func TestSharedKeysLeaveNoMemoryBehind(t *testing.T) {
	srv, rdb := newReal(t)
	admin := srv.Client(t) // INFO, DBSIZE and PTTL, beside the Client's own traffic
	c := locktest.NewClient(t, rdb, lock.WithDefaultLease(sharedMemLease))
	ctx := context.Background()
	prefix := "shared-mem-" + randKey() + "-"

	// Every kind of take once per worker first, so that the scripts are
	// loaded and the connections open before the start is read.
	if err := takeSharedKeys(ctx, c, admin, prefix+"warm-", sharedMemWorkers*3, nil); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	waitNoKeys(t, admin, "the warm-up's keys")
	start := readSharedMem(t, admin)

	// While the keys are taken, no key may lack a TTL: every held key's
	// hash is read with PTTL by its holder (one in sharedMemEvery), and
	// INFO keyspace is read all along (keys less keys with an expiry).
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	var noTTL, samples atomic.Int64
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if m, err := sharedMem(admin); err == nil {
				noTTL.Store(max(noTTL.Load(), m.keys-m.expires))
				samples.Add(1)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var pttlChecked atomic.Int64
	began := time.Now()
	err := takeSharedKeys(ctx, c, admin, prefix, sharedMemKeys, &pttlChecked)
	took := time.Since(began)
	close(stop)
	sampler.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if n := noTTL.Load(); n != 0 {
		t.Errorf("%d keys without a TTL while the keys were taken (INFO keyspace, %d samples)", n, samples.Load())
	}
	if samples.Load() < 2 {
		t.Errorf("INFO keyspace read %d times while the keys were taken: no sample to judge by", samples.Load())
	}
	if want := int64(sharedMemKeys / sharedMemEvery); pttlChecked.Load() != want {
		t.Errorf("%d held keys' TTLs read, want %d", pttlChecked.Load(), want)
	}
	right := readSharedMem(t, admin)

	// A lease later (and the linger), the keys are gone and used_memory
	// is back within sharedMemWithin of its start.
	back := waitNoKeys(t, admin, fmt.Sprintf("the %d keys", sharedMemKeys))
	var end redisMem
	memBack := locktest.Eventually(t, locktest.Bound(2*time.Second), "used_memory back near its start", func() bool {
		end = readSharedMem(t, admin)
		return end.used-start.used <= sharedMemWithin
	})
	t.Logf("%d keys taken in %v; right after: %d keys, used_memory +%d KiB (%d B per key); keys gone %v later, "+
		"used_memory %+d B from its start %v after that; %d keyspace samples",
		sharedMemKeys, took.Round(time.Millisecond), right.keys-start.keys, (right.used-start.used)>>10,
		(right.used-start.used)/sharedMemKeys, back.Round(time.Millisecond), end.used-start.used,
		memBack.Round(time.Millisecond), samples.Load())
	if end.keys != start.keys {
		t.Errorf("DBSIZE %d at the end, %d at the start", end.keys, start.keys)
	}
}

// takeSharedKeys takes n distinct keys (prefix and a number) once each
// with c, sharedMemWorkers at a time, in turn with Acquire (limit 3),
// TryAcquire (limit 3) and RLock, and releases each at once. With
// checked, one key in sharedMemEvery has its hash's PTTL read while held
// (counted in checked); a PTTL outside (0, lease] is an error.
func takeSharedKeys(ctx context.Context, c *lock.Client, admin *redis.Client, prefix string, n int, checked *atomic.Int64) error {
	ctx, cancel := context.WithTimeout(ctx, locktest.Bound(30*time.Second))
	defer cancel()
	var next atomic.Int64
	errs := make(chan error, sharedMemWorkers)
	var wg sync.WaitGroup
	for range sharedMemWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := takeSharedKey(ctx, c, admin, prefix+strconv.Itoa(i), i, checked); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func takeSharedKey(ctx context.Context, c *lock.Client, admin *redis.Client, key string, i int, checked *atomic.Int64) error {
	var unlock lock.UnlockFunc
	var err error
	switch i % 3 {
	case 0:
		_, unlock, err = c.Acquire(ctx, key, 3)
	case 1:
		_, unlock, err = c.TryAcquire(ctx, key, 3)
	default:
		_, unlock, err = c.RLock(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("take %q: %w", key, err)
	}
	if checked != nil && i%sharedMemEvery == 0 {
		ttl, err := admin.PTTL(ctx, "lockkit:{"+key+"}").Result()
		switch {
		case err != nil:
			return fmt.Errorf("PTTL of %q: %w", key, err)
		case ttl <= 0 || ttl > sharedMemLease:
			return fmt.Errorf("%q held with PTTL %v, want within (0, %v]", key, ttl, sharedMemLease)
		}
		checked.Add(1)
	}
	if err := unlock(); err != nil {
		return fmt.Errorf("release %q: %w", key, err)
	}
	return nil
}

// waitNoKeys waits until Redis has no key left, for one lease and the
// linger (and a second for Redis's expiry cycle), and returns how long
// that took.
func waitNoKeys(t *testing.T, admin *redis.Client, what string) time.Duration {
	t.Helper()
	limit := locktest.Bound(sharedMemLease + sharedMemLinger + time.Second)
	return locktest.Eventually(t, limit, what+" gone from Redis", func() bool {
		return readSharedMem(t, admin).keys == 0
	})
}

// redisMem is what INFO says of Redis's memory and keys.
type redisMem struct {
	used          int64 // used_memory, in bytes
	keys, expires int64 // in db0: keys, and keys with an expiry
}

func readSharedMem(t *testing.T, admin *redis.Client) redisMem {
	t.Helper()
	m, err := sharedMem(admin)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sharedMem reads INFO memory and keyspace; an empty db0 has no line.
func sharedMem(admin *redis.Client) (redisMem, error) {
	info, err := admin.InfoMap(context.Background(), "memory", "keyspace").Result()
	if err != nil {
		return redisMem{}, fmt.Errorf("INFO: %w", err)
	}
	var m redisMem
	if m.used, err = strconv.ParseInt(info["Memory"]["used_memory"], 10, 64); err != nil {
		return redisMem{}, fmt.Errorf("INFO used_memory: %w", err)
	}
	for field := range strings.SplitSeq(info["Keyspace"]["db0"], ",") {
		name, v, _ := strings.Cut(field, "=")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch name {
		case "keys":
			m.keys = n
		case "expires":
			m.expires = n
		}
	}
	return m, nil
}
