package lock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

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
		for info, err := range c.Held(ctx, pattern) {
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
		for info, err := range c.Held(ctx, tc.pattern) {
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
