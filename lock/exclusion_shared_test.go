package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Exclusion for shared holds: at most limit holders of a semaphore at
// once across Clients; readers together, never with a writer.

func TestExclusionSemaphoreAdmitsAtMostLimitHolders(t *testing.T) {
	srv, _ := newReal(t)
	var clients []*lock.Client
	for range 3 {
		clients = append(clients, locktest.NewClient(t, srv.Client(t)))
	}
	key := "sem-" + randKey()
	const limit, workers, rounds = 3, 12, 4
	var in, most, done atomic.Int64
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[g%len(clients)]
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				lctx, unlock, err := c.Acquire(ctx, key, limit)
				if err != nil {
					t.Error(err)
					cancel()
					return
				}
				n := in.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(20 * time.Millisecond)
				if lctx.Err() != nil {
					t.Errorf("permit lost: %v", context.Cause(lctx))
				}
				in.Add(-1)
				if err := unlock(); err != nil {
					t.Error(err)
				}
				cancel()
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if most.Load() > limit {
		t.Errorf("%d holders at once, limit %d", most.Load(), limit)
	}
	if most.Load() < 2 {
		t.Errorf("at most %d holders at once: permits did not run together", most.Load())
	}
	if done.Load() != workers*rounds {
		t.Errorf("%d of %d acquisitions", done.Load(), workers*rounds)
	}
}

func TestExclusionReadersShareWritersExclude(t *testing.T) {
	srv, _ := newReal(t)
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	key := "rw-" + randKey()
	r1, u1, err := a.RLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_, u2, err := b.TryRLock(ctx, key)
	if err != nil {
		t.Fatal("second reader:", err)
	}
	if _, _, err := b.TryLock(ctx, key); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("writer with readers: %v", err)
	}
	// A writer queues; a later reader queues behind it.
	wdone := make(chan error, 1)
	var wctx context.Context
	var wu lock.UnlockFunc
	go func() {
		var err error
		wctx, wu, err = b.Lock(ctx, key)
		wdone <- err
	}()
	waitQueued(t, srv.Client(t), key, 1)
	if _, _, err := a.TryRLock(ctx, key); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("reader after a queued writer: %v", err)
	}
	// The writer may not re-enter as a reader deadlock: a reader asking for Lock is refused.
	if _, _, err := a.Lock(r1, key); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("reader asking for the write lock: %v", err)
	}
	_ = u1()
	_ = u2()
	select {
	case err := <-wdone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("writer not handed the key")
	}
	// The writer takes read holds of its key as re-entries.
	rctx, ru, err := b.RLock(wctx, key)
	if err != nil {
		t.Fatal("writer's read hold:", err)
	}
	_ = rctx
	_ = ru()
	_ = wu()
}
