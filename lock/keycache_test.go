package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// A Client keeps the Redis names of its last 256 keys, shared by holds: keys with braces, percent signs, unicode, and keys around the
// 128-byte limit of a readable tag (equal up to the last byte) stay
// distinct; two Clients with different prefixes do not exclude each
// other; more than 256 keys (the cache emptied) keep working.
func TestKeyCacheKeepsKeysDistinct(t *testing.T) {
	t.Parallel()
	srv, _ := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t), lock.WithPrefix("p1"))
	a2 := locktest.NewClient(t, srv.Client(t), lock.WithPrefix("p1"))
	b := locktest.NewClient(t, srv.Client(t), lock.WithPrefix("p2"))

	base := randKey()
	keys := []string{base, "{" + base + "}", "%7B" + base + "%7D", "%25" + base, base + "é", base + "e\u0301", base + "}{"}
	for _, n := range []int{127, 128, 129, 200} {
		long := strings.Repeat("x", n-len(base)-1) + base
		keys = append(keys, long+"a", long+"b")
		braces := strings.Repeat("{", n/3) + base // escapes to more than 128 bytes
		keys = append(keys, braces, braces+"}")
	}
	for i := range 300 {
		keys = append(keys, fmt.Sprintf("%s-many-%d", base, i))
	}
	seen := map[string]bool{}
	uniq := keys[:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			uniq = append(uniq, k)
		}
	}
	keys = uniq
	var unlocks []lock.UnlockFunc
	for _, k := range keys {
		actx, ua, err := a.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("a: TryLock(%q): %v (keys must stay distinct)", k, err)
		}
		if !lock.Held(actx, k) {
			t.Fatalf("a: not Held(%q)", k)
		}
		_, ub, err := b.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("b (another prefix): TryLock(%q): %v", k, err)
		}
		unlocks = append(unlocks, ua, ub)
	}
	for _, k := range keys {
		if _, _, err := a2.TryLock(ctx, k); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("a2 (same prefix): TryLock(%q) = %v, want ErrNotObtained", k, err)
		}
	}
	for _, u := range unlocks {
		if err := u(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys[:20] {
		_, u, err := a2.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("a2 after unlock: TryLock(%q): %v", k, err)
		}
		_ = u()
	}
}
