package lock

import (
	"testing"

	"github.com/lockkit/lockkit/lock/internal/glob"
)

// TestGlobMatch: Held's filter matches keys as Redis matches a glob, and
// the SCAN pattern it sends matches every escaped name whose key matches.
func TestGlobMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, key string
		want         bool
	}{
		{"*", "", true},
		{"*", "orders/42", true},
		{"orders:*", "orders:42", true},
		{"orders:*", "order:42", false},
		{"a?", "a%", true},
		{"a?", "a", false},
		{"a?", "a%%", false},
		{"c[}]", "c}", true},
		{"d[%]", "d%", true},
		{"d[^%]", "d%", false},
		{"d[^%]", "dx", true},
		{"[a-c]x", "bx", true},
		{"[c-a]x", "bx", true},
		{"[a-c]x", "dx", false},
		{`\*`, "*", true},
		{`\*`, "x", false},
		{`a\?`, "a?", true},
		{`a\?`, "ab", false},
		{"*b*b*", "abxbyb", true},
		{"*b*b*", "abx", false},
		{"a*c", "abcbc", true},
		{"a*c", "abcb", false},
		{"[\\]]", "]", true},
	} {
		if got := glob.Match(tc.pattern, tc.key); got != tc.want {
			t.Errorf("glob.Match(%q, %q) = %v, want %v", tc.pattern, tc.key, got, tc.want)
		}
		name := "p:{" + tagEscaper.Replace(tc.key) + "}"
		if tc.want && !glob.Match(glob.ScanMatch("p", tc.pattern, tagEscaper), name) {
			t.Errorf("glob.ScanMatch(%q) = %q misses %q", tc.pattern, glob.ScanMatch("p", tc.pattern, tagEscaper), name)
		}
	}
}
