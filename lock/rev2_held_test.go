package lock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// TestHeldDigestKeysFollowPattern: a lock stored by its digest is listed
// by a pattern starting with '*' whatever the rest says. A pattern "*a"
// lists a digest-stored lock whose key ends in 'b' when its digest's hex
// ends in 'a' (SCAN matches the digest's hex, the filter keeps every
// digest-stored lock), and misses one whose key ends in 'a' otherwise.
func TestHeldDigestKeysFollowPattern(t *testing.T) {
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
	listed := map[string]bool{}
	for info, err := range c.Held(ctx, "*a") {
		if err != nil {
			t.Fatalf("Held: %v", err)
		}
		listed[info.Name] = true
	}
	for name, last := range names {
		switch {
		case last == "b" && listed[name]:
			t.Errorf("Held(\"*a\") lists %s, the lock of a key ending in 'b'", name)
		case last == "a" && !listed[name]:
			t.Errorf("Held(\"*a\") misses %s, the lock of a key ending in 'a'", name)
		}
	}
}

// TestHeldAcceptsRedisGlobs: Held's pattern is documented as a glob as in
// Redis's SCAN, but checkPattern validates it with path.Match, whose
// syntax is stricter: a class starting with '-' ("[-_]", common with key
// names) is refused with ErrInvalid although Redis reads the '-' as a
// literal, as globMatch does. (Redis also accepts a trailing '\' and an
// unterminated '['; refusing those is a defensible choice.)
func TestHeldAcceptsRedisGlobs(t *testing.T) {
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
