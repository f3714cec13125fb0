package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Options and the Redis configuration New checks: bad input refused,
// eviction policy warned of, out-of-memory errors named.

// logged returns a logger that records at Debug and up, and a function
// that waits up to 2 s for a record of level (e.g. "WARN"; "" waits for
// nothing) and returns what was logged.
func logged(t *testing.T) (*slog.Logger, func(level string) string) {
	var buf locktest.SyncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return log, func(level string) string {
		t.Helper()
		if level != "" {
			locktest.Eventually(t, 2*time.Second, "a "+level+" record logged", func() bool { return strings.Contains(buf.String(), "level="+level) })
		}
		return buf.String()
	}
}

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

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	var nilClient *redis.Client
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}})
	t.Cleanup(func() { _ = ring.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cluster.Close() })
	tests := []struct {
		name string
		rdb  redis.UniversalClient
		opts []lock.Option
		want string
	}{
		{"nil client", nil, nil, "nil Redis client"},
		{"ring", ring, nil, "redis.Ring cannot hold locks"},
		{"typed nil client", nilClient, nil, "nil Redis client"},
		{"zero lease", rdb, []lock.Option{lock.WithDefaultLease(0)}, "lease 0s is shorter"},
		{"negative lease", rdb, []lock.Option{lock.WithDefaultLease(-time.Second)}, "lease -1s is shorter"},
		{"lease too short to renew", rdb, []lock.Option{lock.WithDefaultLease(5 * time.Millisecond)}, "shorter than the minimum"},
		{"empty prefix", rdb, []lock.Option{lock.WithPrefix("")}, "prefix"},
		{"prefix with brace", rdb, []lock.Option{lock.WithPrefix("a{b")}, "prefix"},
		{"no replica to acknowledge", rdb, []lock.Option{lock.WithReplicaAck(0, time.Second)}, "at least 1 replica"},
		{"no time to acknowledge", rdb, []lock.Option{lock.WithReplicaAck(1, 0)}, "timeout of 1 ms or more"},
		{"acknowledgement on a cluster", cluster, []lock.Option{lock.WithReplicaAck(1, time.Second)}, "ClusterClient"},
		{"nil logger", rdb, []lock.Option{lock.WithLogger(nil)}, "nil logger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := lock.New(tt.rdb, tt.opts...)
			if c != nil || !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, %v; want ErrInvalid mentioning %q", c, err, tt.want)
			}
		})
	}
}

func TestLockRejectsBadInput(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	tests := []struct {
		name string
		key  string
		opts []lock.LockOption
		want string
	}{
		{"empty key", "", nil, "empty key"},
		{"oversized key", strings.Repeat("k", lock.MaxKeyLen+1), nil, "longer than the maximum"},
		{"zero lease", "k", []lock.LockOption{lock.WithLease(0)}, "lease 0s"},
		{"negative fixed lease", "k", []lock.LockOption{lock.WithFixedLease(-time.Second)}, "lease -1s"},
		{"short lease", "k", []lock.LockOption{lock.WithLease(time.Millisecond)}, "shorter than the minimum"},
		{"zero wait", "k", []lock.LockOption{lock.WithMaxWait(0)}, "wait limit 0s"},
		{"negative wait", "k", []lock.LockOption{lock.WithMaxWait(-time.Second)}, "wait limit -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, call := range []func(context.Context, string, ...lock.LockOption) (context.Context, lock.UnlockFunc, error){c.Lock, c.TryLock} {
				ctx, unlock, err := call(context.Background(), tt.key, tt.opts...)
				if ctx != nil || unlock != nil || !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v; want ErrInvalid mentioning %q", err, tt.want)
				}
			}
		})
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("bad input wrote to Redis: %v", keys)
	}
}

// With Redis down, TryLock fails with Redis's error, not ErrNotObtained:
// an unreachable Redis is not contention.
func TestRedisDownIsAnErrorNotContention(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	mr.Close()
	_, _, err := c.TryLock(context.Background(), "k")
	if err == nil || errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock with Redis down = %v, want the Redis error", err)
	}
}

// A Redis full under an eviction policy that finds nothing to evict (here
// volatile-lru, with every other key written without a TTL) refuses new
// locks with ErrOutOfMemory, and the error names that policy: it must not
// send the operator looking at a noeviction setting that is not there.
func TestOOMErrorNamesEvictionPolicy(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru")
	rdb := srv.Client(t)
	log, await := logged(t)
	c := locktest.NewClient(t, rdb, lock.WithLogger(log))
	await("WARN") // New has read the policy
	fill(t, rdb)
	_, _, err := c.Lock(context.Background(), "new", lock.WithMaxWait(time.Second))
	if !errors.Is(err, lock.ErrOutOfMemory) {
		t.Fatalf("Lock on a full Redis = %v, want ErrOutOfMemory", err)
	}
	if msg := err.Error(); strings.Contains(msg, "noeviction") || !strings.Contains(msg, "volatile-lru") {
		t.Fatalf("OOM error under volatile-lru = %q: want the policy named, and no noeviction", msg)
	}
}

// New warns once, naming the policy, when Redis's maxmemory-policy may
// evict lock keys (every policy but noeviction), and says nothing above
// Debug where it cannot tell: CONFIG GET refused, as managed Redis does.
func TestEvictionPolicyWarnedAtNew(t *testing.T) {
	t.Parallel()
	policies := []string{"noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random",
		"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"}
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", policy)
			log, await := logged(t)
			c := locktest.NewClient(t, srv.Client(t), lock.WithLogger(log))
			_, unlock := locktest.MustLock(t, c, context.Background(), "k")
			_ = unlock()
			if policy == "noeviction" {
				_ = c.Close() // waits for the check
				if out := await(""); strings.Contains(out, "level=WARN") {
					t.Fatalf("Warn under noeviction: %s", out)
				}
				return
			}
			await("WARN")
			_ = c.Close() // nothing more comes
			out := await("WARN")
			if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "maxmemory_policy="+policy) || !strings.Contains(out, "evict") {
				t.Fatalf("log under %s = %q, want one Warn naming the policy and eviction", policy, out)
			}
		})
	}
	t.Run("config refused", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, "--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", "")
		log, await := logged(t)
		c := locktest.NewClient(t, srv.Client(t), lock.WithLogger(log))
		out := await("DEBUG")
		_ = c.Close()
		if strings.Count(out, "level=DEBUG") != 1 || strings.Contains(out, "level=WARN") {
			t.Fatalf("log with CONFIG refused = %q, want one Debug record and no Warn", out)
		}
	})
}

// A Redis full with the noeviction policy refuses new locks with an error
// that says so (ErrOutOfMemory), while held locks keep renewing and their
// unlock still releases: nothing is silently lost, and locking works again
// once memory is freed.
func TestOutOfMemoryRefusesNewLocksOnly(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb, lock.WithDefaultLease(600*time.Millisecond))
	ctx := context.Background()
	held, unlock := locktest.MustLock(t, c, ctx, "held")
	filled := fill(t, rdb)

	// Redis may free some memory after the fill (client buffers shrink in
	// its cron): a Lock that found room is premise lost, and the fill is
	// made again, three times at most.
	var err error
	for try := 1; ; try++ {
		var unlockNew lock.UnlockFunc
		_, unlockNew, err = c.Lock(ctx, "new", lock.WithMaxWait(time.Second))
		if err != nil || try == 3 {
			break
		}
		_ = unlockNew()
		t.Logf("premise: Redis had room again after the fill (try %d): filling again", try)
		filled = append(filled, fill(t, rdb)...)
	}
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
