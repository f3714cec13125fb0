package locktest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/locktest"
)

// The code under test: reserve takes one item of a SKU out of stock
// under the SKU's lock, reading and writing through a store that rejects
// writes with an older fencing token than the last it accepted. check
// runs between the read and the write (a test hook; nil in production).
func reserve(ctx context.Context, locker lock.Locker, st *store, sku string, check func(context.Context)) error {
	ctx, unlock, err := locker.Lock(ctx, "stock:"+sku)
	if err != nil {
		return err
	}
	defer unlock()
	token, _ := lock.FencingToken(ctx, "stock:"+sku)
	n := st.get(sku)
	if n == 0 {
		return errors.New("out of stock")
	}
	if check != nil {
		check(ctx)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx) // lock.ErrLost: another caller may own the SKU now
	}
	return st.put(sku, n-1, token)
}

type store struct {
	mu    sync.Mutex
	stock map[string]int
	token uint64
}

func (s *store) get(sku string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stock[sku]
}

func (s *store) put(sku string, n int, token uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.token {
		return fmt.Errorf("stale write: token %d, store at %d", token, s.token)
	}
	s.stock[sku], s.token = n, token
	return nil
}

func TestReserveSellsEachItemOnce(t *testing.T) {
	locker := locktest.New(t)
	st := &store{stock: map[string]int{"sku-1": 5}}
	var mu sync.Mutex
	sold := 0
	locktest.Contend(t, 20, func(int) error {
		err := reserve(context.Background(), locker, st, "sku-1", nil)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			sold++
		case err.Error() != "out of stock":
			return err
		}
		return nil
	})
	if sold != 5 || st.get("sku-1") != 0 {
		t.Fatalf("sold %d, %d left; want 5 and 0", sold, st.get("sku-1"))
	}
}

func TestReserveGivesUpWhenTheLockIsLost(t *testing.T) {
	locker := locktest.New(t)
	st := &store{stock: map[string]int{"sku-1": 5}}
	err := reserve(context.Background(), locker, st, "sku-1", func(ctx context.Context) {
		locktest.Lose(t, locker, "stock:sku-1") // the lease ends mid-way
	})
	if !errors.Is(err, lock.ErrLost) || st.get("sku-1") != 5 {
		t.Fatalf("reserve: %v, %d left; want ErrLost and nothing written", err, st.get("sku-1"))
	}
}

// Two replicas of a service share one Redis: while one holds a key, the
// other is turned away.
func ExampleServer_Client() {
	srv, _ := locktest.StartServer() // in a test: locktest.NewServer(t)
	defer srv.Close()
	replicaA, replicaB := srv.Client(), srv.Client()

	_, unlock, _ := replicaA.Lock(context.Background(), "orders:42")
	_, _, err := replicaB.TryLock(context.Background(), "orders:42")
	fmt.Println("replica B while A holds:", errors.Is(err, lock.ErrNotObtained))
	_ = unlock()
	_, unlockB, err := replicaB.TryLock(context.Background(), "orders:42")
	fmt.Println("replica B after A let go:", err)
	_ = unlockB()
	// Output:
	// replica B while A holds: true
	// replica B after A let go: <nil>
}

// A lease that lapses in Redis is reported to the holder at its next
// renewal, and the key is free for others.
func ExampleServer_FastForward() {
	srv, _ := locktest.StartServer() // in a test: locktest.NewServer(t)
	defer srv.Close()
	holder, other := srv.Client(), srv.Client()

	ctx, unlock, _ := holder.Lock(context.Background(), "report", lock.WithLease(300*time.Millisecond))
	defer unlock()
	srv.FastForward(time.Second) // the lease ends in Redis
	<-ctx.Done()                 // the watchdog's next renewal finds the key gone
	fmt.Println("holder:", context.Cause(ctx))
	_, unlockOther, err := other.TryLock(context.Background(), "report")
	fmt.Println("other:", err)
	_ = unlockOther()
	// Output:
	// holder: lock: lease lost
	// other: <nil>
}
