package lock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Client.Held: the keys held in Redis matching a pattern.

// heldKeys lists the keys Held yields for pattern, sorted, failing the
// test on an error.
func heldKeys(t *testing.T, c *lock.Client, pattern string) []string {
	t.Helper()
	var keys []string
	for info, err := range c.List(context.Background(), pattern) {
		if err != nil {
			t.Fatalf("Held(%q): %v", pattern, err)
		}
		if !info.Held {
			t.Errorf("Held(%q) yielded %q, not held", pattern, info.Key)
		}
		keys = append(keys, info.Key)
	}
	slices.Sort(keys)
	return keys
}

func TestHeldPatterns(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb, lock.WithOwnerLabel("lister"))
	long := strings.Repeat("x", 200)
	held := []string{"orders:1", "orders:2", "users:1", "a{b}c", "100%", "star*", long}
	for _, k := range held {
		_, unlock := locktest.MustLock(t, c, ctx, k)
		defer unlock()
	}
	_, unlock := locktest.MustLock(t, c, ctx, "released")
	_ = unlock()
	other := locktest.NewClient(t, rdb, lock.WithPrefix("other"))
	_, unlockOther := locktest.MustLock(t, other, ctx, "orders:3")
	defer unlockOther()
	// Plenty of keys for SCAN to take several steps.
	for i := range 1500 {
		rdb.Set(ctx, "lockkit:unrelated:"+itoa(int64(i)), "v", 0)
	}

	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"orders:*", []string{"orders:1", "orders:2"}},
		{"*:1", []string{"orders:1", "users:1"}},
		{"a{b}c", []string{"a{b}c"}},
		{"100%", []string{"100%"}},
		{`star\*`, []string{"star*"}},
		{"released", nil},
		{"*", []string{"", "100%", "a{b}c", "orders:1", "orders:2", "star*", "users:1"}}, // "" is the long key's digest
	} {
		if got := heldKeys(t, c, tc.pattern); !slices.Equal(got, tc.want) {
			t.Errorf("Held(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
	for info, err := range c.List(ctx, "orders:1") {
		if err != nil || info.Holder.Label != "lister" || info.HoldCount != 1 || info.Token == 0 || info.Node != "" {
			t.Fatalf("Held(orders:1): %+v, %v", info, err)
		}
	}
	// Stopping early stops the scan.
	n := 0
	for range c.List(ctx, "*") {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("break after %d", n)
	}
}

// TestHeldPatternMatchesEscapedKeys: Held's pattern is a glob over the
// user's keys, although Redis stores '%', '{' and '}' escaped as three
// bytes: '?' and classes match such keys.
func TestHeldPatternMatchesEscapedKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	for _, tc := range []struct{ key, pattern string }{
		{"a%", "a?"},
		{"b{", "b?"},
		{"c}", "c[}]"},
		{"d%", "d[%]"},
	} {
		_, unlock := locktest.MustLock(t, c, ctx, tc.key)
		found := false
		for info, err := range c.List(ctx, tc.pattern) {
			if err != nil {
				t.Fatalf("Held(%q): %v", tc.pattern, err)
			}
			found = found || info.Key == tc.key
		}
		if !found {
			t.Errorf("Held(%q) does not list the held key %q", tc.pattern, tc.key)
		}
		_ = unlock()
	}
}

// TestHeldDigestKeysFollowPattern: the key of a lock stored by its digest
// is not stored, so only a pattern of '*'s lists it: "*a" lists neither a
// key ending in 'b' whose digest's hex ends in 'a' (which SCAN matches)
// nor one ending in 'a'; "*" lists both.
func TestHeldDigestKeysFollowPattern(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb)
	// A long key ending in 'b' whose digest ends in 'a', and one ending in
	// 'a' whose digest does not.
	var endsB, endsA string
	for i := 0; endsB == "" || endsA == ""; i++ {
		k := strings.Repeat("k", 200) + itoa(int64(i))
		sum := sha256.Sum256([]byte(k + "b"))
		if hex.EncodeToString(sum[:])[63] == 'a' && endsB == "" {
			endsB = k + "b"
		}
		sum = sha256.Sum256([]byte(k + "a"))
		if hex.EncodeToString(sum[:])[63] != 'a' && endsA == "" {
			endsA = k + "a"
		}
	}
	names := map[string]string{}
	for _, k := range []string{endsA, endsB} {
		_, unlock := locktest.MustLock(t, c, ctx, k)
		defer unlock()
		info, err := c.Inspect(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		names[info.Name] = k[len(k)-1:]
	}
	listed := func(pattern string) map[string]bool {
		names := map[string]bool{}
		for info, err := range c.List(ctx, pattern) {
			if err != nil {
				t.Fatalf("Held(%q): %v", pattern, err)
			}
			names[info.Name] = true
		}
		return names
	}
	some, all := listed("*a"), listed("*")
	for name, last := range names {
		if some[name] {
			t.Errorf("Held(\"*a\") lists %s, the digest-stored lock of a key ending in %q", name, last)
		}
		if !all[name] {
			t.Errorf("Held(\"*\") misses %s, the digest-stored lock of a key ending in %q", name, last)
		}
	}
}

// TestHeldAcceptsRedisGlobs: Held's pattern is a glob as in Redis's SCAN:
// a class starting with '-' ("[-_]", common with key names) is accepted,
// the '-' read as a literal as Redis reads it.
func TestHeldAcceptsRedisGlobs(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb)
	for _, tc := range []struct{ pattern, key string }{
		{"report[-_]2026", "report-2026"},
		{"v[-.]1", "v.1"},
	} {
		_, unlock := locktest.MustLock(t, c, ctx, tc.key)
		found := false
		for info, err := range c.List(ctx, tc.pattern) {
			if err != nil {
				t.Errorf("Held(%q): %v", tc.pattern, err)
				break
			}
			found = found || info.Key == tc.key
		}
		if !found {
			t.Errorf("Held(%q) does not list %q", tc.pattern, tc.key)
		}
		_ = unlock()
	}
}
