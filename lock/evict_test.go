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
