package reliability_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// restartLease is the lease of the locks in the restart tests: long
// enough that a restart of a loaded machine's redis-server fits in it.
const restartLease = 2 * time.Second

// restartHolder takes key through a Client of srv after a few earlier
// acquisitions, so its fencing token is above 1, and returns a second
// Client of srv to contend with.
func restartHolder(t *testing.T, srv *redistest.Server, key string) (held context.Context, unlock lock.UnlockFunc, token uint64, other *lock.Client) {
	t.Helper()
	a, b := leaseClient(t, srv.Client(t), restartLease), leaseClient(t, srv.Client(t), restartLease)
	ctx := context.Background()
	for range 5 {
		_, unlock, err := a.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
	}
	held, unlock, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	token, _ = lock.FencingToken(held, key)
	return held, unlock, token, b
}

// leaseClient returns a Client of rdb whose locks have lease, closed when
// the test ends.
func leaseClient(t *testing.T, rdb redis.UniversalClient, lease time.Duration) *lock.Client {
	t.Helper()
	c, err := lock.New(rdb, lock.WithDefaultLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRestartWithoutPersistence shows what a Redis restarted at once and
// empty forgets: the lease, so that another owner takes the key while the
// holder's context is still live. The holder must still be told, within
// its lease, and the new owner's fencing token is still larger than the
// holder's (tokens follow Redis's clock when the last one is gone), so
// fenced storage rejects the holder's late writes.
func TestRestartWithoutPersistence(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	held, unlock, before, other := restartHolder(t, srv, "restart")
	srv.Restart()
	back := now()

	taken, unlockTaken, err := other.TryLock(context.Background(), "restart")
	if err != nil {
		t.Fatalf("TryLock after the restart: %v; want the forgotten key free", err)
	}
	overlap := held.Err() == nil
	if after, _ := lock.FencingToken(taken, "restart"); after <= before {
		t.Errorf("token after the restart %d, before %d: want a larger one", after, before)
	}
	select {
	case <-held.Done():
	case <-time.After(restartLease):
		t.Fatalf("holder not told within its %v lease after Redis came back", restartLease)
	}
	told := now() - back
	if cause := context.Cause(held); !errors.Is(cause, lock.ErrLost) {
		t.Errorf("holder's cause = %v, want ErrLost", cause)
	}
	if err := unlock(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("holder's unlock = %v, want ErrLost", err)
	}
	if err := unlockTaken(); err != nil {
		t.Errorf("new owner's unlock: %v", err)
	}
	t.Logf("another owner took the key at once (holder's context still live: %v); holder told %s after Redis came back",
		overlap, ms(told))
}

// TestRestartWithAOF restarts a Redis that logs every write to its
// append-only file before answering: the lease and the fencing counter
// survive, and the holder keeps its lock: its renewals go on.
func TestRestartWithAOF(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	held, unlock, before, other := restartHolder(t, srv, "restart")
	srv.Restart()
	ctx := context.Background()

	if _, _, err := other.TryLock(ctx, "restart"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryLock after the restart = %v, want ErrNotObtained", err)
	}
	select {
	case <-held.Done():
		t.Fatalf("holder lost the lock across the restart: %v", context.Cause(held))
	case <-time.After(restartLease * 3 / 2): // the lease from before the restart has run out
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	taken, unlockTaken, err := other.TryLock(ctx, "restart")
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := lock.FencingToken(taken, "restart"); after != before+1 {
		t.Errorf("token after the restart %d, before %d: want the counter kept", after, before)
	}
	if err := unlockTaken(); err != nil {
		t.Error(err)
	}
}
