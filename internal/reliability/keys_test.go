package reliability_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// maxRedisName bounds every Redis key and channel name a lock uses, given
// its prefix: "P:{" + a hash tag of at most 128 bytes + "}:released".
func maxRedisName(prefix string) int { return len(prefix) + len(":{") + 128 + len("}:released") }

// miniClients returns a miniredis server and two lock Clients of it, all
// closed when tb ends.
func miniClients(tb testing.TB) (*miniredis.Miniredis, *lock.Client, *lock.Client) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	var cs []*lock.Client
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		c, err := lock.New(rdb)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })
		cs = append(cs, c)
	}
	return mr, cs[0], cs[1]
}

// FuzzKeys locks two keys from two Clients. Distinct keys must never
// collide, equal keys must exclude each other, no key may make a script
// fail, every Redis name must stay short whatever the key, and invalid
// keys must be refused before Redis is called.
func FuzzKeys(f *testing.F) {
	long := strings.Repeat("k", 200)
	sum := sha256.Sum256([]byte(long))
	for _, seed := range [][2]string{
		{"orders:42", "orders:43"},
		{"orders:42", "orders:42"},
		{"{a}", "%7Ba%7D"},                        // a brace and its escape
		{"%", "%25"},                              // the escape character and its escape
		{"a}:fence", "a"},                         // a key that spells another's counter
		{"x", "x}:released"},                      // ... or channel
		{long, "%h" + hex.EncodeToString(sum[:])}, // a digest and the key it stands for
		{strings.Repeat("{", 300), strings.Repeat("}", 300)},
		{"日本語", "\x00\xff\xfe"},
		{"", "a"},
		{strings.Repeat("a", lock.MaxKeyLen+1), strings.Repeat("a", lock.MaxKeyLen)},
	} {
		f.Add(seed[0], seed[1])
	}
	mr, a, b := miniClients(f)
	bound := maxRedisName(lock.DefaultPrefix)
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		mr.FlushAll()
		ctx := context.Background()
		l1, unlock1, err := a.TryLock(ctx, k1, lock.WithFixedLease(time.Minute))
		if !validKey(k1) {
			if !errors.Is(err, lock.ErrInvalid) || len(mr.Keys()) > 0 {
				t.Fatalf("TryLock of a %d-byte key = %v, keys %d; want ErrInvalid before any write", len(k1), err, len(mr.Keys()))
			}
			return
		}
		if err != nil {
			t.Fatalf("TryLock(%q): %v", k1, err)
		}
		if !lock.Held(l1, k1) {
			t.Fatalf("context of TryLock(%q) does not hold it", k1)
		}
		names := mr.Keys()
		_, unlock2, err := b.TryLock(ctx, k2, lock.WithFixedLease(time.Minute))
		switch {
		case !validKey(k2):
			if !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("TryLock of a %d-byte key = %v, want ErrInvalid", len(k2), err)
			}
		case k1 == k2:
			if !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("second owner's TryLock(%q) = %v, want ErrNotObtained", k2, err)
			}
		case err != nil:
			t.Fatalf("TryLock(%q) while %q is held: %v", k2, k1, err)
		default:
			if len(mr.Keys()) != 2*len(names) {
				t.Fatalf("Redis keys %q after locking %q and %q: want %d distinct", mr.Keys(), k1, k2, 2*len(names))
			}
			if err := unlock2(); err != nil {
				t.Fatalf("unlock %q: %v", k2, err)
			}
		}
		for _, name := range mr.Keys() {
			if len(name) > bound {
				t.Fatalf("Redis key of %d bytes for a %d-byte user key, want at most %d", len(name), len(k1), bound)
			}
		}
		if err := unlock1(); err != nil {
			t.Fatalf("unlock %q: %v", k1, err)
		}
		for _, name := range mr.Keys() {
			if !strings.HasSuffix(name, "}") || mr.TTL(name) > time.Second || mr.HGet(name, "n") != "0" {
				t.Fatalf("key %q left after unlock (TTL %v), want only free lock hashes, for 1 s at most", name, mr.TTL(name))
			}
		}
	})
}

func validKey(k string) bool { return k != "" && len(k) <= lock.MaxKeyLen }

// TestKeyLimits checks the key sizes refused, and that the refusal names
// the problem and reaches no Redis.
func TestKeyLimits(t *testing.T) {
	t.Parallel()
	mr, c, _ := miniClients(t)
	for _, tc := range []struct {
		name string
		key  string
		want string // in the error; "" for success
	}{
		{"empty", "", "empty key"},
		{"longest", strings.Repeat("k", lock.MaxKeyLen), ""},
		{"oversized", strings.Repeat("k", lock.MaxKeyLen+1), "longer than the maximum"},
		{"huge", strings.Repeat("k", 16<<20), "longer than the maximum"},
	} {
		for _, call := range []struct {
			name string
			fn   func(context.Context, string, ...lock.LockOption) (context.Context, lock.UnlockFunc, error)
		}{{"Lock", c.Lock}, {"TryLock", c.TryLock}} {
			t.Run(tc.name+"/"+call.name, func(t *testing.T) {
				before := mr.CommandCount()
				_, unlock, err := call.fn(context.Background(), tc.key)
				if tc.want == "" {
					if err != nil {
						t.Fatal(err)
					}
					if err := unlock(); err != nil {
						t.Fatal(err)
					}
					return
				}
				if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s of a %d-byte key = %v, want ErrInvalid saying %q", call.name, len(tc.key), err, tc.want)
				}
				if n := mr.CommandCount() - before; n != 0 {
					t.Fatalf("%d Redis commands sent for an invalid key", n)
				}
			})
		}
	}
}
