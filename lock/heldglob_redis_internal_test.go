package lock

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock/internal/glob"
)

// TestGlobMatchAgreesWithRedis compares, on random patterns that Held
// accepts and random keys, glob.Match with Redis's own matching (SSCAN
// MATCH over the keys), and checks that glob.ScanMatch's SCAN pattern, run by
// Redis over the escaped names, keeps every key Redis matches.
func TestGlobMatchAgreesWithRedis(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	gen := func(alphabet string, n int) string {
		b := make([]byte, r.IntN(n+1))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	keySet := map[string]bool{}
	for len(keySet) < 400 {
		if k := gen(`ab-^]\%{}[*?x`, 4); k != "" { // Lock refuses an empty key
			keySet[k] = true
		}
	}
	for k := range keySet {
		rdb.SAdd(ctx, "keys", k)
		rdb.SAdd(ctx, "names", "p:{"+tagEscaper.Replace(k)+"}")
	}
	sscan := func(set, match string) map[string]bool {
		got := map[string]bool{}
		var cursor uint64
		for {
			ms, next, err := rdb.SScan(ctx, set, cursor, match, 10000).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				got[m] = true
			}
			if cursor = next; cursor == 0 {
				return got
			}
		}
	}
	bad, checked, seen := 0, 0, map[string]bool{}
	for tried := 0; tried < 10000 && bad < 10; tried++ {
		pattern := gen(`ab-^[]\*?%{}`, 7)
		if seen[pattern] || checkPattern(pattern) != nil {
			continue
		}
		seen[pattern] = true
		checked++
		redis := sscan("keys", pattern)
		names := sscan("names", glob.ScanMatch("p", pattern, tagEscaper))
		var diff, missed []string
		for k := range keySet {
			if glob.Match(pattern, k) != redis[k] {
				diff = append(diff, k)
			}
			if redis[k] && !names["p:{"+tagEscaper.Replace(k)+"}"] {
				missed = append(missed, k)
			}
		}
		slices.Sort(diff)
		slices.Sort(missed)
		if len(diff) > 0 {
			bad++
			t.Errorf("pattern %q: glob.Match differs from Redis on %q", pattern, diff)
		}
		if len(missed) > 0 {
			bad++
			t.Errorf("pattern %q: SCAN pattern %q misses the names of %q", pattern, glob.ScanMatch("p", pattern, tagEscaper), missed)
		}
	}
	t.Logf("%d patterns, %d keys", checked, len(keySet))
}
