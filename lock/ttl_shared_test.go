package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (issue 33, "Bounded memory": every key with a TTL): while
// eight workers of three Clients take permits and read and write holds
// with short deadlines (waiters leaving, hand-offs, lapsed leases), no
// key of the Clients is ever without a TTL, scanned every 20 ms; once
// they stop, every key is gone within a few seconds (lease 1 s, the
// waits' deadlines a few seconds at most).
func TestTTLSharedEveryKeyHasOne(t *testing.T) {
	// Its workers load the CPU: it runs alone, not beside the parallel
	// tests whose time bounds that would upset (see TestMain).
	srv, rdb := newReal(t)
	var clients []*lock.Client
	for range 3 {
		clients = append(clients, locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(time.Second)))
	}
	stop := make(chan struct{})
	sem, rw := "sh-ttl-s-"+randKey(), "sh-ttl-rw-"+randKey()
	w1 := shareContend(clients, sem, 2, 4, "p", newShareRegister(2), stop)
	w2 := shareContend(clients, rw, 0, 4, "rrw", newShareRegister(0), stop)
	ctx := context.Background()
	bad := map[string]bool{}
	scans := 0
	for start := time.Now(); time.Since(start) < 3*time.Second; time.Sleep(20 * time.Millisecond) {
		keys, err := rdb.Keys(ctx, "lockkit:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		scans++
		for _, k := range keys {
			if d := rdb.PTTL(ctx, k).Val(); d == -1 && !bad[k] {
				bad[k] = true
				t.Errorf("%s without a TTL (type %s)", k, rdb.Type(ctx, k).Val())
			}
		}
	}
	close(stop)
	w1.Wait()
	w2.Wait()
	t.Logf("%d scans", scans)
	locktest.Eventually(t, 10*time.Second, "every key gone after the workers stopped", func() bool {
		return len(rdb.Keys(ctx, "lockkit:{sh-ttl*").Val()) == 0
	})
}
