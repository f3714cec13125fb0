package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// A Redis full under an eviction policy that finds nothing to evict (here
// volatile-lru, with every other key written without a TTL) refuses new
// locks with ErrOutOfMemory, and the error names that policy: it must not
// send the operator looking at a noeviction setting that is not there.
func TestOOMErrorNamesEvictionPolicy(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru")
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb, lock.WithLogger(slog.New(slog.DiscardHandler)))
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
	policies := []string{"noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random",
		"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"}
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", policy)
			var buf locktest.SyncBuffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c := locktest.NewClient(t, srv.Client(t), lock.WithLogger(log))
			_, unlock := locktest.MustLock(t, c, context.Background(), "k")
			_ = unlock()
			warns := strings.Count(buf.String(), "level=WARN")
			if policy == "noeviction" {
				if buf.String() != "" {
					t.Fatalf("logged under noeviction: %s", buf.String())
				}
				return
			}
			if warns != 1 || !strings.Contains(buf.String(), "maxmemory_policy="+policy) || !strings.Contains(buf.String(), "evict") {
				t.Fatalf("log under %s = %q, want one Warn naming the policy and eviction", policy, buf.String())
			}
		})
	}
	t.Run("config refused", func(t *testing.T) {
		srv := redistest.Start(t, "--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", "")
		var buf locktest.SyncBuffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c := locktest.NewClient(t, srv.Client(t), lock.WithLogger(log))
		_, unlock := locktest.MustLock(t, c, context.Background(), "k")
		_ = unlock()
		if out := buf.String(); strings.Count(out, "level=DEBUG") != 1 || strings.Contains(out, "level=WARN") {
			t.Fatalf("log with CONFIG refused = %q, want one Debug record and no Warn", out)
		}
	})
}
