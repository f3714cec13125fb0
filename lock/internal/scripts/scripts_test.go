package scripts

import (
	"context"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/redistest"
)

// Every script that uses the queue carries queue.lua's helpers where its
// mark was, token.lua's before them, and no mark is left.
func TestQueueHelpersInserted(t *testing.T) {
	for name, s := range map[string]Script{"acquire": Acquire, "release": Release, "leave": Leave, "force": Force} {
		src := s.src.(string)
		if strings.Contains(src, queueMark) || !strings.Contains(src, queueSrc) {
			t.Errorf("%s.lua: queue.lua not in place of its mark", name)
		}
		if i := strings.Index(src, tokenSrc); strings.Contains(src, tokenMark) || i < 0 || i > strings.Index(src, queueSrc) {
			t.Errorf("%s.lua: token.lua not in place of its mark, before queue.lua", name)
		}
	}
}

// Do sends a script Redis does not know with EVAL, which caches it: the
// next EVALSHA of its hash runs.
func TestDoLoadsUnknownScript(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := Renew.Do(ctx, rdb, []any{"", "", 1, "nokey", "owner", 1000}).Int64Slice()
	if err != nil || len(v) != 1 || v[0] != 0 {
		t.Fatalf("Renew of a missing key: %v, %v; want [0]", v, err)
	}
	if ok, err := Renew.Exists(ctx, rdb).Result(); err != nil || !ok[0] {
		t.Fatalf("after Do, SCRIPT EXISTS: %v, %v; want cached", ok, err)
	}
}
