package reliability_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// injectFull fills the locks' Redis, whose maxmemory policy is
// noeviction, while worker 0 is inside its long section, until it refuses
// every write, and frees the memory two leases later.
func injectFull(t *testing.T, r *faultRun) {
	rdb := r.srv.Client(t)
	r.awaitLong(t)
	start := now()
	keys := redistest.Fill(t, rdb)
	// Redis's own buffers shrink after the filling: fill it up again
	// every 20 ms, so that it stays full.
	for now()-start < int64(2*r.lease) && r.sleep(20*time.Millisecond) {
		keys = append(keys, redistest.Fill(t, rdb)...)
	}
	slices.Sort(keys)
	if err := rdb.Del(context.Background(), slices.Compact(keys)...).Err(); err != nil {
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
