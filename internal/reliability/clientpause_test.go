package reliability_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestClientPauseWriteLongerThanLease pauses the writes of Redis (CLIENT
// PAUSE WRITE, as a failover tool or an operator does) for 2.5 times a
// holder's 1 s lease. The holder's renewals are scripts that may write,
// so Redis holds them back, and its lease runs out (Redis answers reads
// of the key as gone, though it deletes nothing during a pause). The
// holder must be told lock.ErrLost within its lease, before the key is
// seen gone; but nobody can displace it: every Lock is held back too, so
// no other owner appears before the pause ends.
func TestClientPauseWriteLongerThanLease(t *testing.T) {
	t.Parallel()
	const (
		lease = time.Second
		pause = 5 * lease / 2
		key   = "paused"
		hash  = "lockkit:{paused}" // see docs/design.md
	)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	warmScripts(t, srv.Addr)
	lctx, unlock, err := leaseClient(t, srv.Client(t), lease).Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var told atomic.Int64
	context.AfterFunc(lctx, func() { told.Store(now()) })
	token := holderOf(rdb, hash)
	time.Sleep(lease / 2) // past the first renewal
	other := leaseClient(t, srv.Client(t), lease)
	// The pause ends in Redis no sooner than pause after the command was
	// sent: a read that returned before then ran inside the pause.
	sent := now()
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "WRITE").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	start := now()
	taken := make(chan int64, 1)
	go func() {
		_, unlockOther, err := other.Lock(ctx, key)
		if err != nil {
			t.Errorf("other Client's Lock: %v", err)
			taken <- 0
			return
		}
		taken <- now()
		_ = unlockOther()
	}()
	// Reads go on during a write pause: look at the key every millisecond.
	var gone int64
	for end := start + int64(pause) - int64(20*time.Millisecond); now() < end; time.Sleep(time.Millisecond) {
		h := holderOf(rdb, hash)
		switch read := now(); {
		case h == "" && gone == 0:
			gone = read
		case h != "" && h != token && read < sent+int64(pause):
			t.Fatalf("another owner (token %s) has the key %s into the pause", h, ms(read-start))
		}
	}
	if lctx.Err() == nil || !errors.Is(context.Cause(lctx), lock.ErrLost) {
		t.Fatalf("holder's context at the end of the pause: %v, want ended with lock.ErrLost", context.Cause(lctx))
	}
	if d := told.Load() - start; d > int64(lease) {
		t.Errorf("holder told %s after the pause began, more than its %v lease", ms(d), lease)
	}
	if gone == 0 || gone < told.Load() {
		t.Errorf("key seen gone %s after the pause began (0: not before it ended), holder told %s after: want the notice first", ms(gone-start), ms(told.Load()-start))
	}
	unlockErr := unlock()
	took := <-taken
	if took != 0 && took < start+int64(pause) {
		t.Errorf("another Client took the key %s before the pause ended", ms(start+int64(pause)-took))
	}
	t.Logf("holder told %s after the pause began (lease %v, pause %v), its lease seen gone %s after; no other owner during the pause; its unlock: %v; another Client took the key %s after the pause ended",
		ms(told.Load()-start), lease, pause, ms(gone-told.Load()), unlockErr, ms(took-start-int64(pause)))
}
