package reliability_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// injectFull fills the locks' Redis, whose maxmemory policy is
// noeviction, while worker 0 is inside its long section: 2,000 values of
// 4 KiB in database 1, twice its 4 MB maxmemory, written with DEBUG
// POPULATE, which ignores the limit. Redis then refuses every command
// that may need memory until they are deleted two leases later. Then
// once more for 300 ms, 200 ms after, as soon as a section is under way.
func injectFull(t *testing.T, r *faultRun) {
	rdb := redis.NewClient(&redis.Options{Addr: r.srv.Addr, DB: 1})
	defer rdb.Close()
	r.awaitLong(t)
	r.fill(t, rdb, 2*r.lease)
	// Once more under another holder, so that the fault exposes more
	// sections than the least it must (one) when nothing goes wrong.
	if r.sleep(200*time.Millisecond) && r.awaitHeld(t, r.srv, "") {
		r.fill(t, rdb, 300*time.Millisecond)
	}
}

// fill writes 8 MB to rdb's database, past maxmemory, and deletes it d
// later, or once the workers finished.
func (r *faultRun) fill(t *testing.T, rdb *redis.Client, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	start := now()
	if err := rdb.Do(ctx, "DEBUG", "POPULATE", 2000, "fill", 4096).Err(); err != nil {
		t.Fatalf("DEBUG POPULATE: %v", err)
	}
	r.sleep(d)
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	r.windows = append(r.windows, window{-1, start, now()})
}

// checkFull: the holder kept its lock (renewals need no memory), and
// Lock calls on the full Redis failed with ErrOutOfMemory, none with
// another error.
func checkFull(t *testing.T, r *faultRun, recs []record) {
	long, _ := longSection(t, recs)
	if !long.Done || long.Lost != 0 || long.Unlock != "" {
		t.Errorf("holder on a full Redis: done %v, lost at %d, unlock %q; want it to keep the lock and release it", long.Done, long.Lost, long.Unlock)
	}
	refused, other := 0, 0
	for _, rec := range recs {
		switch {
		case rec.Kind != "error":
		case strings.Contains(rec.Err, lock.ErrOutOfMemory.Error()):
			refused++
		case other == 0:
			t.Errorf("Lock on a full Redis: %q, want %q", rec.Err, lock.ErrOutOfMemory)
			other++
		default:
			other++
		}
	}
	if other > 1 {
		t.Errorf("... and %d other such errors", other-1)
	}
	// Eleven Clients try again 10 ms after each refusal for two leases.
	if refused < 100 {
		t.Errorf("%d Lock calls refused with %q, want at least 100: the fault did not keep Redis full", refused, lock.ErrOutOfMemory)
	}
	t.Logf("%d Lock calls refused with %q", refused, lock.ErrOutOfMemory)
}
